import { describe, expect, it } from 'vitest';
import {
  effectiveTimeouts,
  setConfigStatement,
  setLocalStatements,
} from '../../shared/db/transactionBounds.js';
import {
  DEFAULT_TRANSACTION_TIMEOUTS,
  loadEnv,
  TransientDbError,
  transactionTimeoutsOf,
} from '../../shared/index.js';

describe('transaction bounds: configuration', () => {
  it('defaults: lock 2 s ≤ statement 4 s < function timeout 5 s; idle 15 s > publish timeout 10 s', () => {
    expect(transactionTimeoutsOf(loadEnv({}))).toEqual(DEFAULT_TRANSACTION_TIMEOUTS);
  });

  it('unset, the bounds follow the function and publish timeouts', () => {
    expect(
      transactionTimeoutsOf(
        loadEnv({ FUNCTION_TIMEOUT_MS: '1500', SQS_VISIBILITY_TIMEOUT_S: '10' }),
      ),
    ).toEqual({
      lockTimeoutMs: 600,
      statementTimeoutMs: 1_200,
      idleInTransactionTimeoutMs: 15_000,
    });
    expect(transactionTimeoutsOf(loadEnv({ PUBLISH_TIMEOUT_MS: '20000' }))).toMatchObject({
      idleInTransactionTimeoutMs: 25_000,
    });
  });

  it('a statement bound at or above the function timeout is refused, naming the variable', () => {
    expect(() => loadEnv({ DB_STATEMENT_TIMEOUT_MS: '5000' })).toThrow(
      /DB_STATEMENT_TIMEOUT_MS: 5000 must be below FUNCTION_TIMEOUT_MS \(5000\)/,
    );
    expect(() =>
      loadEnv({
        DB_STATEMENT_TIMEOUT_MS: '9000',
        FUNCTION_TIMEOUT_MS: '10000',
        SQS_VISIBILITY_TIMEOUT_S: '60',
      }),
    ).not.toThrow();
  });

  it('a lock bound above the statement bound is refused', () => {
    expect(() => loadEnv({ DB_LOCK_TIMEOUT_MS: '4500' })).toThrow(
      /DB_LOCK_TIMEOUT_MS: 4500 must be at most DB_STATEMENT_TIMEOUT_MS/,
    );
  });

  it('an idle bound not above the publish timeout is refused (the relay waits for confirms)', () => {
    expect(() => loadEnv({ DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '10000' })).toThrow(
      /DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: 10000 must exceed PUBLISH_TIMEOUT_MS \(10000\)/,
    );
  });
});

describe('transaction bounds: per transaction', () => {
  const base = {
    lockTimeoutMs: 2_000,
    statementTimeoutMs: 4_000,
    idleInTransactionTimeoutMs: 15_000,
  };

  it('the transaction options replace the database bounds; no deadline, no cap', () => {
    expect(effectiveTimeouts(base, { timeouts: { statementTimeoutMs: 0 } }, undefined)).toEqual({
      ...base,
      statementTimeoutMs: 0,
    });
    expect(effectiveTimeouts(undefined, undefined, undefined)).toEqual({});
  });

  it('a deadline caps every bound, a disabled one included; past it no transaction begins', () => {
    const now = 1_000_000;
    expect(
      effectiveTimeouts(base, { timeouts: { statementTimeoutMs: 0 } }, now + 3_000, now),
    ).toEqual({
      lockTimeoutMs: 2_000,
      statementTimeoutMs: 3_000,
      idleInTransactionTimeoutMs: 3_000,
    });
    expect(() => effectiveTimeouts(base, undefined, now, now)).toThrow(TransientDbError);
  });

  it('renders SET LOCAL statements (pg) and one set_config statement (Data API)', () => {
    expect(setLocalStatements({ lockTimeoutMs: 2_000, idleInTransactionTimeoutMs: 0 })).toEqual([
      'SET LOCAL lock_timeout = 2000',
      'SET LOCAL idle_in_transaction_session_timeout = 0',
    ]);
    expect(setConfigStatement({ statementTimeoutMs: 4_000 })).toBe(
      "SELECT set_config('statement_timeout', '4000', true)",
    );
    expect(setConfigStatement({})).toBeUndefined();
    expect(() => setLocalStatements({ lockTimeoutMs: 1.5 })).toThrow(RangeError);
  });
});
