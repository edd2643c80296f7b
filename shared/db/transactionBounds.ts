import type { TransactionTimeouts } from '../config/env.js';

export type { TransactionTimeouts };

import { TransientDbError } from './errors.js';

export interface TransactionOptions {
  /** Replaces the database's bounds for this transaction (e.g. 0 = none for a migration). */
  timeouts?: Partial<TransactionTimeouts>;
}

/** Databases whose open transactions can be bounded by a deadline and aborted before it. */
export interface DeadlineAware {
  /**
   * The invocation's deadline (epoch ms), or undefined: no transaction's bounds reach past it,
   * and none begins after it.
   */
  setDeadline(deadlineEpochMs: number | undefined): void;
  /** Rolls back every open transaction now (their callbacks then fail). Returns how many. */
  abortTransactions(reason: string): Promise<number>;
}

export function isDeadlineAware(db: unknown): db is DeadlineAware {
  const d = db as Partial<DeadlineAware> | undefined;
  return typeof d?.setDeadline === 'function' && typeof d?.abortTransactions === 'function';
}

const SETTINGS: Record<keyof TransactionTimeouts, string> = {
  lockTimeoutMs: 'lock_timeout',
  statementTimeoutMs: 'statement_timeout',
  idleInTransactionTimeoutMs: 'idle_in_transaction_session_timeout',
};

/**
 * The bounds of a transaction beginning now: the database's, replaced by the transaction's own,
 * each capped by the time left before the deadline (a disabled one becomes that time). Throws a
 * transient error when the deadline has passed: no transaction should begin then.
 */
export function effectiveTimeouts(
  base: TransactionTimeouts | undefined,
  options: TransactionOptions | undefined,
  deadlineEpochMs: number | undefined,
  now = Date.now(),
): Partial<TransactionTimeouts> {
  const merged: Partial<TransactionTimeouts> = { ...base, ...options?.timeouts };
  if (deadlineEpochMs === undefined) return merged;
  const left = Math.floor(deadlineEpochMs - now);
  if (left <= 0)
    throw new TransientDbError('the invocation deadline has passed: no new transaction');
  const out: Partial<TransactionTimeouts> = {};
  for (const key of Object.keys(SETTINGS) as (keyof TransactionTimeouts)[]) {
    const v = merged[key];
    out[key] = v === undefined || v === 0 ? left : Math.min(v, left);
  }
  return out;
}

const settings = (t: Partial<TransactionTimeouts>) =>
  (Object.keys(SETTINGS) as (keyof TransactionTimeouts)[])
    .filter((k) => t[k] !== undefined)
    .map((k) => {
      const v = t[k] as number;
      if (!Number.isInteger(v) || v < 0) throw new RangeError(`${k}: ${v} is not a duration in ms`);
      return [SETTINGS[k], v] as const;
    });

/** `SET LOCAL …` statements (node-postgres sends them with BEGIN in one round trip). */
export function setLocalStatements(t: Partial<TransactionTimeouts>): string[] {
  return settings(t).map(([name, v]) => `SET LOCAL ${name} = ${v}`);
}

/** One statement setting the bounds for the transaction (`set_config(…, true)` = `SET LOCAL`). */
export function setConfigStatement(t: Partial<TransactionTimeouts>): string | undefined {
  const s = settings(t);
  if (s.length === 0) return undefined;
  return `SELECT ${s.map(([name, v]) => `set_config('${name}', '${v}', true)`).join(', ')}`;
}
