import {
  BeginTransactionCommand,
  CommitTransactionCommand,
  ExecuteStatementCommand,
  type Field,
  type RDSDataClient,
  RollbackTransactionCommand,
  type SqlParameter,
} from '@aws-sdk/client-rds-data';
import { backoffDelay, sleep } from '../../util/async.js';
import { DatabaseResumingError, DbError, TransientDbError } from '../errors.js';
import { mapSqlState } from '../sqlState.js';
import { mapOutsideQuotes, splitStatements } from '../statements.js';
import {
  type DeadlineAware,
  effectiveTimeouts,
  setConfigStatement,
  type TransactionOptions,
  type TransactionTimeouts,
} from '../transactionBounds.js';
import type {
  QueryResult,
  ResultLimits,
  Row,
  SqlDatabase,
  SqlExecutor,
  SqlParam,
} from '../types.js';

/**
 * The Data API's bounds on a result (Aurora UG, "Limitations for the RDS Data API"): a call that
 * would return more than 1 MiB is terminated (BadRequestException, "Database returned more than
 * the allowed response size limit"), and a row of a result is at most 64 KB (read as 64,000 bytes).
 */
export const DATA_API_RESULT_LIMITS: ResultLimits = {
  maxResponseBytes: 1024 * 1024,
  maxRowBytes: 64_000,
};

/** "YYYY-MM-DD HH:MM:SS.FFF" in UTC, the format the Data API's TIMESTAMP typeHint takes. */
function dataApiTimestamp(d: Date): string {
  return d.toISOString().replace('T', ' ').replace('Z', '');
}

/**
 * One positional parameter as a Data API `SqlParameter`. The type comes from the statement, never
 * from the value: a string travels as it is, without a `typeHint` (the service sends it as
 * character varying), so a statement that needs another type says so with a cast (`$1::uuid`,
 * `$2::timestamptz`, `$3::jsonb`). A string is never parsed: a correlation id that looks like a
 * timestamp or an upper-case UUID reaches the database unchanged. Only a `Date` (a JavaScript
 * type, not a guess) becomes TIMESTAMP, in UTC.
 */
export function toSqlParameter(name: string, value: SqlParam): SqlParameter {
  if (value === null) return { name, value: { isNull: true } };
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new DbError(`parameter ${name}: invalid Date`);
    return { name, value: { stringValue: dataApiTimestamp(value) }, typeHint: 'TIMESTAMP' };
  }
  if (typeof value === 'boolean') return { name, value: { booleanValue: value } };
  if (typeof value === 'number') {
    return Number.isInteger(value)
      ? { name, value: { longValue: value } }
      : { name, value: { doubleValue: value } };
  }
  return { name, value: { stringValue: value } };
}

/** Rewrites `$1…$n` to `:p1…:pn`, leaving quoted text alone. */
export function toNamed(sql: string): string {
  return mapOutsideQuotes(sql, (code) => code.replace(/\$(\d+)/g, ':p$1'));
}

function fromField(f: Field, typeName: string | undefined): unknown {
  if (f.isNull) return null;
  if (f.booleanValue !== undefined) return f.booleanValue;
  if (f.longValue !== undefined) return f.longValue;
  if (f.doubleValue !== undefined) return f.doubleValue;
  if (f.blobValue !== undefined) return Buffer.from(f.blobValue);
  const s = f.stringValue ?? null;
  if (s === null) return null;
  switch (typeName) {
    case 'json':
    case 'jsonb':
      return JSON.parse(s);
    case 'timestamptz':
    case 'timestamp':
      return new Date(`${s.replace(' ', 'T')}Z`);
    default:
      return s;
  }
}

/** Maps a Data API error to the SQL port's classes (same SQLSTATE rules as node-postgres). */
export function mapDataApiError(err: unknown): Error {
  if (err instanceof DbError) return err;
  const e = err as { name?: string; message?: string };
  const message = e.message ?? String(err);
  switch (e.name) {
    case 'DatabaseErrorException': {
      const state = /SQLState: ([0-9A-Z]{5})/.exec(message)?.[1];
      return mapSqlState(state, message, err);
    }
    case 'DatabaseResumingException': // a paused Aurora Serverless v2 cluster is waking up
      return new DatabaseResumingError(message, { cause: err });
    case 'DatabaseUnavailableException':
    case 'StatementTimeoutException':
    case 'ServiceUnavailableError':
    case 'TransactionNotFoundException': // expired (3 min idle): run the whole transaction again
    case 'ThrottlingException':
      return new TransientDbError(message, { cause: err });
    default:
      if (/ECONNREFUSED|ECONNRESET|socket hang up|ETIMEDOUT/.test(message)) {
        return new TransientDbError(message, { cause: err });
      }
      return new DbError(message, { cause: err });
  }
}

export interface DataApiOptions {
  /** The Aurora cluster ARN. */
  resourceArn: string;
  /** The Secrets Manager ARN of the database credentials. */
  secretArn: string;
  database: string;
}

/** An open transaction; `aborted` once it was rolled back from outside (the deadline). */
interface OpenTransaction {
  transactionId: string;
  aborted?: string;
}

/** Sends one Data API command (through the resume wait, outside a transaction). */
type Send = <T>(operation: ResumeEvent['operation'], call: () => Promise<T>) => Promise<T>;

const sendOnce: Send = (_operation, call) => call();

class DataApiExecutor implements SqlExecutor {
  constructor(
    private readonly client: RDSDataClient,
    private readonly options: DataApiOptions,
    private readonly tx?: OpenTransaction,
    private readonly send: Send = sendOnce,
  ) {}

  async query<T extends object = Row>(
    sql: string,
    params: readonly SqlParam[] = [],
  ): Promise<QueryResult<T>> {
    if (this.tx?.aborted) throw new TransientDbError(`transaction ${this.tx.aborted}`);
    if (splitStatements(sql).length > 1) {
      throw new DbError('the RDS Data API runs one statement per call; split the script');
    }
    try {
      const command = new ExecuteStatementCommand({
        ...this.options,
        sql: toNamed(sql),
        parameters: params.map((p, i) => toSqlParameter(`p${i + 1}`, p)),
        includeResultMetadata: true,
        ...(this.tx ? { transactionId: this.tx.transactionId } : {}),
      });
      const out = await this.send('ExecuteStatement', () => this.client.send(command));
      const columns = out.columnMetadata ?? [];
      const rows = (out.records ?? []).map((record) => {
        const row: Record<string, unknown> = {};
        record.forEach((field, i) => {
          const c = columns[i];
          row[c?.label ?? c?.name ?? `col${i}`] = fromField(field, c?.typeName);
        });
        return row as T;
      });
      return { rows, rowCount: out.records ? rows.length : (out.numberOfRecordsUpdated ?? 0) };
    } catch (err) {
      throw mapDataApiError(err);
    }
  }
}

/** A call that met a resuming cluster (`DatabaseResumingException`), once it went through or gave up. */
export interface ResumeEvent {
  /** The call that was refused and tried again. */
  operation: 'BeginTransaction' | 'ExecuteStatement';
  /** From its first try to its last answer (ms). */
  waitedMs: number;
  /** Tries, the one that went through included. */
  attempts: number;
  /** False: the wait ran out of budget and the `DatabaseResumingError` was thrown. */
  resumed: boolean;
}

/**
 * How a call refused by a resuming cluster waits. Only a call that begins work is tried again
 * (BeginTransaction, a statement outside a transaction): the service refused it before doing
 * anything, so sending it again cannot apply anything twice. A call inside an open transaction
 * never meets a resume (the transaction holds a connection, so the cluster cannot have paused).
 */
export interface ResumeWait {
  /** The longest one call waits (ms). */
  maxWaitMs: number;
  /**
   * The wait ends this long before the invocation's deadline (`setDeadline`), leaving the time
   * for the work it waited for (ms).
   */
  deadlineMarginMs: number;
  /** Pause between tries: `backoffDelay(n, retryBaseMs, retryMaxMs)`. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** Told of every call that met a resume (metrics, a log line); must not throw. */
  onResume?: (event: ResumeEvent) => void;
}

/**
 * The functions' resume wait: a resume takes up to 15 s (docs/aws-facts.md), so a minute covers a
 * slow one; 5 s before the deadline leaves a consumer's batch (30 s timeout) room for its
 * transaction and its settle. Tries at 250 ms, then doubling to at most 2 s: a call goes through
 * within about 2 s of the resume's end.
 */
export const DEFAULT_RESUME_WAIT: ResumeWait = {
  maxWaitMs: 60_000,
  deadlineMarginMs: 5_000,
  retryBaseMs: 250,
  retryMaxMs: 2_000,
};

/** Settings of the adapter beyond the target database. */
export interface DataApiSettings {
  /** Bounds set in every transaction (`set_config(…, true)`, one call); unset = none. */
  transactionTimeouts?: TransactionTimeouts;
  /**
   * Wait for a resuming cluster (`DatabaseResumingException`) before giving up, within this
   * budget; unset: the `DatabaseResumingError` at once (place-order answers 503 instead).
   */
  resumeWait?: ResumeWait;
}

/**
 * The RDS Data API adapter of the SQL port: the same use cases run against Aurora Serverless v2
 * over HTTPS, without a connection pool. Transactions are Begin/Commit/Rollback with the
 * transaction id on every statement; statements in one transaction run one at a time (the service
 * refuses concurrent calls in a transaction). With `transactionTimeouts`, each transaction starts
 * with one more call that sets its bounds: the service would otherwise keep an abandoned one, and
 * its row locks, for 3 minutes. With `resumeWait`, a call that begins work and meets a paused
 * cluster resuming waits for it within the invocation's budget (docs/design.md §12).
 */
export class DataApiDatabase implements SqlDatabase, DeadlineAware {
  readonly resultLimits = DATA_API_RESULT_LIMITS;
  private readonly executor: DataApiExecutor;
  private deadline: number | undefined;
  private readonly open = new Set<OpenTransaction>();

  constructor(
    private readonly deps: { client: RDSDataClient },
    private readonly options: DataApiOptions,
    private readonly settings: DataApiSettings = {},
  ) {
    this.executor = new DataApiExecutor(deps.client, options, undefined, this.resumeWaiting);
  }

  /**
   * Sends `call`, and while the cluster answers that it is resuming, sends it again with backoff
   * until it goes through or the budget runs out: `maxWaitMs` from the first try, and never past
   * the invocation's deadline less `deadlineMarginMs`. Other errors are thrown as they come.
   */
  private readonly resumeWaiting: Send = async (operation, call) => {
    const wait = this.settings.resumeWait;
    if (!wait) return call();
    const started = Date.now();
    for (let attempts = 1; ; attempts++) {
      try {
        const out = await call();
        if (attempts > 1) {
          wait.onResume?.({ operation, waitedMs: Date.now() - started, attempts, resumed: true });
        }
        return out;
      } catch (err) {
        if ((err as { name?: string }).name !== 'DatabaseResumingException') throw err;
        const until = Math.min(
          started + wait.maxWaitMs,
          this.deadline === undefined
            ? Number.POSITIVE_INFINITY
            : this.deadline - wait.deadlineMarginMs,
        );
        const delay = backoffDelay(attempts, wait.retryBaseMs, wait.retryMaxMs);
        if (Date.now() + delay > until) {
          wait.onResume?.({ operation, waitedMs: Date.now() - started, attempts, resumed: false });
          throw err;
        }
        await sleep(delay);
      }
    }
  };

  query<T extends object = Row>(
    sql: string,
    params?: readonly SqlParam[],
  ): Promise<QueryResult<T>> {
    return this.executor.query<T>(sql, params);
  }

  setDeadline(deadlineEpochMs: number | undefined): void {
    this.deadline = deadlineEpochMs;
  }

  /**
   * Rolls back every open transaction (RollbackTransaction), so its locks go now rather than at
   * the service's 3-minute expiry; their callbacks then fail with a transient error. A rollback
   * the service refuses (a statement of that transaction still running) is left to the
   * transaction's bounds.
   */
  async abortTransactions(reason: string): Promise<number> {
    const open = [...this.open];
    this.open.clear();
    await Promise.all(
      open.map((tx) => {
        tx.aborted = `aborted: ${reason}`;
        return this.rollback(tx.transactionId);
      }),
    );
    return open.length;
  }

  private rollback(transactionId: string): Promise<void> {
    const { resourceArn, secretArn } = this.options;
    return this.deps.client
      .send(new RollbackTransactionCommand({ resourceArn, secretArn, transactionId }))
      .then(
        () => {},
        () => {}, // expired or already gone: nothing was committed either way
      );
  }

  async transaction<T>(
    fn: (tx: SqlExecutor) => Promise<T>,
    options?: TransactionOptions,
  ): Promise<T> {
    // no transaction begins after the deadline (throws)
    effectiveTimeouts(this.settings.transactionTimeouts, options, this.deadline);
    let tx: OpenTransaction;
    try {
      const command = new BeginTransactionCommand(this.options);
      const begun = await this.resumeWaiting('BeginTransaction', () =>
        this.deps.client.send(command),
      );
      tx = { transactionId: begun.transactionId as string };
    } catch (err) {
      throw mapDataApiError(err);
    }
    this.open.add(tx);
    const { resourceArn, secretArn } = this.options;
    try {
      let result: T;
      const executor = new DataApiExecutor(this.deps.client, this.options, tx);
      try {
        // the bounds from now: the begin may have waited for a resume
        const bounds = setConfigStatement(
          effectiveTimeouts(this.settings.transactionTimeouts, options, this.deadline),
        );
        if (bounds) await executor.query(bounds);
        // errors from `fn` are already mapped by the executor, or are the application's own
        result = await fn(executor);
        if (tx.aborted) throw new TransientDbError(`transaction ${tx.aborted}`);
      } catch (err) {
        if (!tx.aborted) await this.rollback(tx.transactionId);
        throw tx.aborted && !(err instanceof TransientDbError)
          ? new TransientDbError(`transaction ${tx.aborted}`, { cause: err })
          : err;
      }
      try {
        await this.deps.client.send(
          new CommitTransactionCommand({ resourceArn, secretArn, transactionId: tx.transactionId }),
        );
      } catch (err) {
        throw mapDataApiError(err);
      }
      return result;
    } finally {
      this.open.delete(tx);
    }
  }

  async close(): Promise<void> {}
}

// The migrate function of a service deployed with the Data API (`DatabaseMigrations`).
export {
  type MigrationsHandlerOptions,
  type MigrationsResponse,
  migrationsLambdaHandler,
} from '../migrationsHandler.js';
