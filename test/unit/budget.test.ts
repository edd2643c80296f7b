import { describe, expect, it } from 'vitest';
import { rabbitRetryBucket, TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import {
  classifyError,
  DEFAULT_RETENTION,
  DEFAULT_RETRY_BUDGET,
  decideRetry,
  EnvelopeError,
  isInfrastructureError,
  loadBudget,
  shortError,
  TransientDbError,
  UniqueViolationError,
  uuidV5,
  validateBudget,
} from '../../shared/index.js';
import { rabbitRetryDelays } from '../../shared/transport/rabbitmq/index.js';

describe('retry budget', () => {
  it('walks the ladder, then parks as exhausted', () => {
    const b = TEST_RETRY_BUDGET;
    expect(decideRetry(b, 0, 0)).toEqual({ retry: true, delayMs: 1_000, attempt: 1 });
    expect(decideRetry(b, 1, 0)).toEqual({ retry: true, delayMs: 2_000, attempt: 2 });
    expect(decideRetry(b, 2, 0)).toEqual({ retry: true, delayMs: 3_000, attempt: 3 });
    expect(decideRetry(b, 3, 0)).toEqual({ retry: false, reason: 'exhausted' });
  });

  it('parks when the next delay would pass the maximum age', () => {
    expect(decideRetry(TEST_RETRY_BUDGET, 0, 59_500)).toEqual({ retry: false, reason: 'max_age' });
  });

  it('deferrals ignore the attempt limit (the last step repeats) but not the age', () => {
    expect(decideRetry(TEST_RETRY_BUDGET, 10, 0, { deferral: true })).toEqual({
      retry: true,
      delayMs: 3_000,
      attempt: 11,
    });
    expect(decideRetry(TEST_RETRY_BUDGET, 10, 58_000, { deferral: true })).toEqual({
      retry: false,
      reason: 'max_age',
    });
  });

  it('one RabbitMQ queue per delay; jitter adds the two neighbouring buckets', () => {
    expect(rabbitRetryDelays(TEST_RETRY_BUDGET)).toEqual([1_000, 2_000, 3_000]);
    expect(rabbitRetryDelays(DEFAULT_RETRY_BUDGET)).toEqual([
      4_500, 5_000, 5_500, 27_000, 30_000, 33_000, 270_000, 300_000, 330_000,
    ]);
    expect(rabbitRetryBucket(DEFAULT_RETRY_BUDGET, 30_000, () => 0.1)).toBe(27_000);
    expect(rabbitRetryBucket(DEFAULT_RETRY_BUDGET, 30_000, () => 0.5)).toBe(30_000);
    expect(rabbitRetryBucket(DEFAULT_RETRY_BUDGET, 30_000, () => 0.9)).toBe(33_000);
  });

  it('refuses a decreasing ladder, and an inbox retention that a redrive could outlive', () => {
    expect(() => validateBudget({ ...TEST_RETRY_BUDGET, ladderMs: [2_000, 1_000] })).toThrow(
      /must not decrease/,
    );
    expect(() =>
      validateBudget(TEST_RETRY_BUDGET, {
        ...DEFAULT_RETENTION,
        inboxMs: DEFAULT_RETENTION.parkingMs,
      }),
    ).toThrow(
      /INBOX_RETENTION_MS: \d+ must exceed RETRY_MAX_AGE_MS \+ REDRIVE_LIMIT × \(PARKING_RETENTION_MS \+ REDRIVE_WINDOW_MS \+ RETRY_MAX_AGE_MS\)/,
    );
  });

  it('reads the environment over the defaults', () => {
    expect(
      loadBudget({ RETRY_LADDER_MS: '100,200', RETRY_MAX_ATTEMPTS: '2', RETRY_JITTER: '0' }),
    ).toMatchObject({
      ladderMs: [100, 200],
      maxAttempts: 2,
      jitter: 0,
    });
    expect(() => loadBudget({ RETRY_LADDER_MS: '5,x' })).toThrow(/RETRY_LADDER_MS\.1: /);
  });
});

describe('error classification', () => {
  it.each([
    [new EnvelopeError('body: not valid JSON', 'body'), 'permanent'],
    [new TransientDbError('deadlock', { code: '40P01' }), 'transient'],
    [new UniqueViolationError('dup', { code: '23505' }), 'unknown'],
    [Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }), 'transient'],
    [new Error('surprise'), 'unknown'],
  ])('%s → %s', (err, expected) => {
    expect(classifyError(err)).toBe(expected);
  });

  it('tells an unreachable database from a failed statement', () => {
    expect(isInfrastructureError(new TransientDbError('Connection terminated unexpectedly'))).toBe(
      true,
    );
    expect(isInfrastructureError(new TransientDbError('admin shutdown', { code: '57P01' }))).toBe(
      true,
    );
    expect(isInfrastructureError(new TransientDbError('serialization', { code: '40001' }))).toBe(
      false,
    );
    expect(
      isInfrastructureError(new TransientDbError('statement timeout', { code: '57014' })),
    ).toBe(false);
  });

  it('short errors are one line and bounded', () => {
    const text = shortError(new Error(`a\nb ${'x'.repeat(500)}`));
    expect(text).not.toContain('\n');
    expect(text.length).toBeLessThanOrEqual(200);
  });
});

describe('uuidV5', () => {
  it('matches the RFC 9562 test vector and is deterministic', () => {
    // RFC 9562 appendix A.4: name "www.example.com" in the DNS namespace
    expect(uuidV5('www.example.com', '6ba7b810-9dad-11d1-80b4-00c04fd430c8')).toBe(
      '2ed6657d-e927-568b-95e1-2665a8aea6a2',
    );
    expect(uuidV5('x')).toBe(uuidV5('x'));
    expect(uuidV5('x')).not.toBe(uuidV5('y'));
  });
});
