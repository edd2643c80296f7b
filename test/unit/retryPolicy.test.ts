import { describe, expect, it } from 'vitest';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import {
  DbError,
  DEFERRED_ERROR,
  EnvelopeError,
  PermanentMessageError,
  RetryPolicy,
  TransientDbError,
} from '../../shared/index.js';

// TEST_RETRY_BUDGET: ladder 1 s, 2 s, 3 s; 3 retries; 60 s maximum age; no jitter.
const NOW = Date.parse('2026-03-01T12:00:00.000Z');
const policy = new RetryPolicy(TEST_RETRY_BUDGET, () => NOW);
/** An `occurred_at` `ms` before the policy's clock. */
const ago = (ms: number) => new Date(NOW - ms).toISOString();
const message = (attempt: number) => ({ attempt });
const transient = () => new TransientDbError('connection terminated unexpectedly');
const statement = () => new TransientDbError('deadlock detected', { code: '40P01' });

describe('retry policy', () => {
  it('retries a transient error on the ladder, one attempt more each time', () => {
    const e = { error: statement() };
    expect(policy.outcome(message(0), ago(0), e)).toEqual({
      kind: 'retry',
      delayMs: 1_000,
      attempt: 1,
      errorClass: 'transient',
      error: 'TransientDbError: deadlock detected',
      infrastructure: false,
    });
    expect(policy.outcome(message(1), ago(0), e)).toMatchObject({ delayMs: 2_000, attempt: 2 });
    expect(policy.outcome(message(2), ago(0), e)).toMatchObject({ delayMs: 3_000, attempt: 3 });
  });

  it('retries an unknown error like a transient one, naming its class', () => {
    expect(policy.outcome(message(0), ago(0), { error: new DbError('boom') })).toMatchObject({
      kind: 'retry',
      errorClass: 'unknown',
      delayMs: 1_000,
    });
    expect(policy.outcome(message(0), ago(0), { error: new Error('odd') })).toMatchObject({
      kind: 'retry',
      errorClass: 'unknown',
      error: 'Error: odd',
    });
  });

  it('parks a permanent error at once, whatever the attempt and age', () => {
    for (const error of [new PermanentMessageError('no id'), new EnvelopeError('bad', 'id')]) {
      expect(policy.outcome(message(0), undefined, { error })).toEqual({
        kind: 'park',
        reason: 'permanent',
        errorClass: 'permanent',
        error: `${error.name}: ${error.message}`,
      });
    }
  });

  it('parks as exhausted once the retries are spent', () => {
    expect(policy.outcome(message(3), ago(0), { error: statement() })).toEqual({
      kind: 'park',
      reason: 'exhausted',
      errorClass: 'transient',
      error: 'TransientDbError: deadlock detected',
    });
  });

  it('parks as max_age when the next delay would take the message past the maximum age', () => {
    expect(policy.outcome(message(0), ago(58_999), { error: statement() })).toMatchObject({
      kind: 'retry',
      delayMs: 1_000,
    });
    expect(policy.outcome(message(0), ago(59_001), { error: statement() })).toMatchObject({
      kind: 'park',
      reason: 'max_age',
      errorClass: 'transient',
    });
  });

  it('starts the window again at the last redrive: an old message gets the whole ladder', () => {
    const old = ago(10 * 60_000); // occurred long before the 60 s window
    const e = { error: transient() };
    expect(policy.outcome(message(0), old, e)).toMatchObject({ kind: 'park', reason: 'max_age' });
    const redriven = (attempt: number, at: number) => ({
      attempt,
      redrive: { count: 1, lastAt: ago(at) },
    });
    expect(policy.outcome(redriven(0, 0), old, e)).toMatchObject({ kind: 'retry', attempt: 1 });
    expect(policy.outcome(redriven(2, 3_000), old, e)).toMatchObject({ kind: 'retry', attempt: 3 });
    expect(policy.outcome(redriven(3, 6_000), old, e)).toMatchObject({ reason: 'exhausted' });
    // the window still ends: 58.5 s after the redrive the next step would pass 60 s
    expect(policy.outcome(redriven(1, 58_500), old, e)).toMatchObject({ reason: 'max_age' });
    // a redrive stamp older than occurred_at (a clock skew) does not extend anything
    expect(
      policy.outcome({ attempt: 0, redrive: { count: 1, lastAt: ago(20 * 60_000) } }, old, e),
    ).toMatchObject({ reason: 'max_age' });
  });

  it('measures no age for a message it could not decode', () => {
    expect(policy.outcome(message(0), undefined, { error: statement() })).toMatchObject({
      kind: 'retry',
      attempt: 1,
    });
  });

  it('retries a deferral past maxAttempts (the last step repeats), but not past the age', () => {
    expect(policy.outcome(message(0), ago(0), 'deferred')).toEqual({
      kind: 'retry',
      delayMs: 1_000,
      attempt: 1,
      errorClass: 'deferred',
      error: DEFERRED_ERROR,
      infrastructure: false,
    });
    expect(policy.outcome(message(10), ago(0), 'deferred')).toMatchObject({
      kind: 'retry',
      delayMs: 3_000,
      attempt: 11,
    });
    expect(policy.outcome(message(10), ago(58_000), 'deferred')).toEqual({
      kind: 'park',
      reason: 'missing_predecessor',
      errorClass: 'deferred',
      error: DEFERRED_ERROR,
    });
  });

  it('flags an unreachable database as infrastructure, a failed statement not', () => {
    expect(policy.outcome(message(0), ago(0), { error: transient() })).toMatchObject({
      kind: 'retry',
      infrastructure: true,
    });
    const refused = new TransientDbError('connect ECONNREFUSED', { code: 'ECONNREFUSED' });
    expect(policy.outcome(message(0), ago(0), { error: refused })).toMatchObject({
      infrastructure: true,
    });
    const shutdown = new TransientDbError('admin shutdown', { code: '57P01' });
    expect(policy.outcome(message(0), ago(0), { error: shutdown })).toMatchObject({
      infrastructure: true,
    });
    expect(policy.outcome(message(0), ago(0), { error: statement() })).toMatchObject({
      infrastructure: false,
    });
  });

  it('reads the clock it was given', () => {
    let now = NOW;
    const moving = new RetryPolicy(TEST_RETRY_BUDGET, () => now);
    const occurred = ago(0);
    expect(moving.outcome(message(0), occurred, 'deferred').kind).toBe('retry');
    now += 60_000;
    expect(moving.outcome(message(0), occurred, 'deferred')).toMatchObject({
      kind: 'park',
      reason: 'missing_predecessor',
    });
  });
});
