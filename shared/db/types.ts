/**
 * The SQL port (docs/design.md §12). Use cases see only these types, never a driver's.
 *
 * Parameters are positional (`$1`, `$2`, …) and limited to what both adapters can carry:
 * strings, finite numbers, booleans, null, Dates and plain JSON objects. Arrays are not portable
 * (the RDS Data API rejects them): pass a set as JSON text and expand it in SQL with
 * `col = ANY (ARRAY(SELECT jsonb_array_elements_text($1::jsonb)))` or `jsonb_to_recordset($1::jsonb)`.
 * Prefer `= ANY (ARRAY(…))` to `IN (SELECT …)`: the planner estimates 100 rows for a set-returning
 * function and turns `IN` into a hash join over a sequential scan of the whole table.
 */
export type SqlParam = string | number | boolean | null | Date;

import type { TransactionOptions } from './transactionBounds.js';

export type Row = Record<string, unknown>;

export interface QueryResult<T extends object = Row> {
  rows: T[];
  /** Rows returned, or affected by INSERT/UPDATE/DELETE without RETURNING. */
  rowCount: number;
}

export interface SqlExecutor {
  query<T extends object = Row>(sql: string, params?: readonly SqlParam[]): Promise<QueryResult<T>>;
}

/**
 * What one statement's result may hold, where the adapter's service bounds it (the RDS Data API:
 * docs/aws-facts.md). A result over either bound fails the statement: a query that reads rows of
 * any size (the relay's claim) sizes its result to stay under them.
 */
export interface ResultLimits {
  /** The largest response one statement may return (bytes). */
  maxResponseBytes: number;
  /** The largest row a result may hold (bytes). */
  maxRowBytes?: number;
}

export interface SqlDatabase extends SqlExecutor {
  /** Bounds on a statement's result; absent: none beyond memory (node-postgres). */
  readonly resultLimits?: ResultLimits;
  /**
   * Runs `fn` in one transaction: COMMIT when it resolves, ROLLBACK when it throws (the error is
   * rethrown, mapped to the classes of `errors.ts`). `fn` must use the executor it receives.
   * The adapter's transaction bounds (`transactionBounds.ts`) apply, replaced by `options`'.
   */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /** Releases every connection. Idempotent. */
  close(): Promise<void>;
}
