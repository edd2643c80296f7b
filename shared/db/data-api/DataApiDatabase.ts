import {
  BeginTransactionCommand,
  CommitTransactionCommand,
  ExecuteStatementCommand,
  type Field,
  type RDSDataClient,
  RollbackTransactionCommand,
  type SqlParameter,
} from '@aws-sdk/client-rds-data';
import { DbError, TransientDbError } from '../errors.js';
import { mapSqlState } from '../sqlState.js';
import { mapOutsideQuotes, splitStatements } from '../statements.js';
import type { QueryResult, Row, SqlDatabase, SqlExecutor, SqlParam } from '../types.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** "YYYY-MM-DD HH:MM:SS.FFF" in UTC, the format the Data API's TIMESTAMP typeHint takes. */
function dataApiTimestamp(d: Date): string {
  return d.toISOString().replace('T', ' ').replace('Z', '');
}

/**
 * One positional parameter as a Data API `SqlParameter`. Strings that are UUIDs or ISO-8601
 * timestamps get their `typeHint` (without it the Data API sends them as text, and PostgreSQL
 * refuses `uuid = text`); Dates become TIMESTAMP; JSON travels as text and is cast in the SQL.
 */
export function toSqlParameter(name: string, value: SqlParam): SqlParameter {
  if (value === null) return { name, value: { isNull: true } };
  if (value instanceof Date)
    return { name, value: { stringValue: dataApiTimestamp(value) }, typeHint: 'TIMESTAMP' };
  if (typeof value === 'boolean') return { name, value: { booleanValue: value } };
  if (typeof value === 'number') {
    return Number.isInteger(value)
      ? { name, value: { longValue: value } }
      : { name, value: { doubleValue: value } };
  }
  if (UUID.test(value)) return { name, value: { stringValue: value }, typeHint: 'UUID' };
  if (ISO_TIMESTAMP.test(value)) {
    return {
      name,
      value: { stringValue: dataApiTimestamp(new Date(value)) },
      typeHint: 'TIMESTAMP',
    };
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

class DataApiExecutor implements SqlExecutor {
  constructor(
    private readonly client: RDSDataClient,
    private readonly options: DataApiOptions,
    private readonly transactionId?: string,
  ) {}

  async query<T extends object = Row>(
    sql: string,
    params: readonly SqlParam[] = [],
  ): Promise<QueryResult<T>> {
    if (splitStatements(sql).length > 1) {
      throw new DbError('the RDS Data API runs one statement per call; split the script');
    }
    try {
      const out = await this.client.send(
        new ExecuteStatementCommand({
          ...this.options,
          sql: toNamed(sql),
          parameters: params.map((p, i) => toSqlParameter(`p${i + 1}`, p)),
          includeResultMetadata: true,
          ...(this.transactionId ? { transactionId: this.transactionId } : {}),
        }),
      );
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

/**
 * The RDS Data API adapter of the SQL port: the same use cases run against Aurora Serverless v2
 * over HTTPS, without a connection pool. Transactions are Begin/Commit/Rollback with the
 * transaction id on every statement; statements in one transaction run one at a time (the service
 * refuses concurrent calls in a transaction).
 */
export class DataApiDatabase implements SqlDatabase {
  private readonly executor: DataApiExecutor;

  constructor(
    private readonly deps: { client: RDSDataClient },
    private readonly options: DataApiOptions,
  ) {
    this.executor = new DataApiExecutor(deps.client, options);
  }

  query<T extends object = Row>(
    sql: string,
    params?: readonly SqlParam[],
  ): Promise<QueryResult<T>> {
    return this.executor.query<T>(sql, params);
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    let transactionId: string;
    try {
      const begun = await this.deps.client.send(new BeginTransactionCommand(this.options));
      transactionId = begun.transactionId as string;
    } catch (err) {
      throw mapDataApiError(err);
    }
    const { resourceArn, secretArn } = this.options;
    let result: T;
    try {
      // errors from `fn` are already mapped by the executor, or are the application's own
      result = await fn(new DataApiExecutor(this.deps.client, this.options, transactionId));
    } catch (err) {
      await this.deps.client
        .send(new RollbackTransactionCommand({ resourceArn, secretArn, transactionId }))
        .catch(() => {}); // expired or already gone: nothing was committed either way
      throw err;
    }
    try {
      await this.deps.client.send(
        new CommitTransactionCommand({ resourceArn, secretArn, transactionId }),
      );
    } catch (err) {
      throw mapDataApiError(err);
    }
    return result;
  }

  async close(): Promise<void> {}
}
