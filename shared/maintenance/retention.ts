import {
  loadEnv,
  type Retention,
  type RetryBudget,
  retentionOf,
  type SqlExecutor,
  validateBudget,
} from '../index.js';
import { OUTBOX_TABLES } from '../pipeline/constants.js';
import { OUTBOX_OF, type Service } from '../pipeline/schema.js';

export { RETENTION_ENV } from '../index.js';

/**
 * Retention maintenance: the tables that grow with every message are trimmed by age, once a day,
 * in small batches.
 *
 * Why each retention exists:
 * - **Inbox** (`processed_messages`, `retention.inboxMs`): the inbox row is what makes a
 *   redelivery a duplicate. It must outlive every way a message can come back: retries (bounded
 *   by the budget's `maxAgeMs`), then for every redrive allowed (`retention.redriveLimit`,
 *   `REDRIVE_LIMIT`) a stay in the parking lot (`retention.parkingMs`), the redrive itself, which
 *   may still take the redrive window (`retention.redriveWindowMs`, `REDRIVE_WINDOW_MS`) to be
 *   settled, and a fresh retry window. Deleting it earlier would let a redriven message apply its
 *   effect a second time, so the configuration refuses an inbox retention that is not longer than
 *   `maxAgeMs + redriveLimit × (parkingMs + redriveWindowMs + maxAgeMs)` at load, and
 *   {@link runMaintenance} checks it again before it deletes anything ({@link validateBudget}).
 * - **Published outbox rows** (`outbox`, `inventory_outbox`, `retention.publishedOutboxMs`):
 *   once the broker confirmed a row, the relay never reads it again (its claim query reads a
 *   partial index of unpublished rows). Published rows are kept for a while only for operators:
 *   to see what was sent and when, and to re-publish by hand after an incident. Unpublished rows
 *   are never deleted, however old: they are events the broker has not confirmed yet (or rows
 *   that need attention), and deleting them would lose a message.
 */

/** The tables maintenance trims, in the order it trims them. */
export const MAINTENANCE_TABLES = ['processed_messages', ...OUTBOX_TABLES] as const;
export type MaintenanceTable = (typeof MAINTENANCE_TABLES)[number];

/** The tables of a service's database maintenance trims: its inbox and its outbox. */
export function maintenanceTablesOf(service: Service): readonly MaintenanceTable[] {
  return ['processed_messages', OUTBOX_OF[service]];
}

export const DEFAULT_MAINTENANCE_BATCH_SIZE = 5_000;

/**
 * Reads the retention (`INBOX_RETENTION_MS`, `PARKING_RETENTION_MS`,
 * `PUBLISHED_OUTBOX_RETENTION_MS`, `REDRIVE_WINDOW_MS`, `REDRIVE_LIMIT`; unset or empty → the
 * defaults) through the configuration schema: a bad value, or an inbox retention the configured
 * budget could outlive, throws a `ConfigError` naming the variable(s).
 */
export function loadRetention(env: NodeJS.ProcessEnv = process.env): Retention {
  return retentionOf(loadEnv(env));
}

export interface MaintenanceOptions {
  retention: Retention;
  /** The retry budget in force: its `maxAgeMs` bounds how long a message can keep coming back. */
  budget: RetryBudget;
  /** Rows per DELETE statement (each its own short transaction). Default 5000. */
  batchSize?: number;
  /** Count what would be deleted, delete nothing. */
  dryRun?: boolean;
  /** The reference time for the cutoffs (default: now). */
  now?: Date;
  /**
   * The tables of this database to trim, in `MAINTENANCE_TABLES` order (default: every one, both
   * services' schemas in one database); a service's own: `maintenanceTablesOf(service)`.
   */
  tables?: readonly MaintenanceTable[];
}

export interface TableMaintenanceResult {
  /** Rows deleted (on a dry run: rows that would be deleted). */
  deleted: number;
  /** DELETE statements run, the last one deleting fewer than `batchSize` (0 on a dry run). */
  batches: number;
  /** Rows older than this (ISO 8601) were eligible. */
  cutoff: string;
}

export interface MaintenanceResult {
  dryRun: boolean;
  batchSize: number;
  /** Per table trimmed. */
  tables: Partial<Record<MaintenanceTable, TableMaintenanceResult>>;
}

/**
 * Which rows of each table are expired, as a predicate on `$1` (the cutoff). Table names come
 * from this constant, never from input. The outbox predicate excludes unpublished rows
 * explicitly (`published_at < $1` alone would too, as NULL compares unknown: say it anyway).
 */
const EXPIRED: Record<MaintenanceTable, string> = {
  processed_messages: 'processed_at < $1',
  outbox: 'published_at IS NOT NULL AND published_at < $1',
  inventory_outbox: 'published_at IS NOT NULL AND published_at < $1',
};

/**
 * Deletes one batch: the subquery picks up to `$2` expired rows by physical address (`ctid`),
 * the outer DELETE fetches exactly those with a TID scan and checks the predicate again. The
 * node-postgres and Data API adapters both carry it: the array is built in SQL, no parameter is
 * an array. Deleting `WHERE id IN (SELECT … LIMIT n)` instead is planned as a hash semi-join over
 * a full scan of the table, once per batch.
 */
function deleteBatchSql(table: MaintenanceTable): string {
  return `DELETE FROM ${table}
    WHERE ctid = ANY (ARRAY(SELECT ctid FROM ${table} WHERE ${EXPIRED[table]} LIMIT $2))
      AND ${EXPIRED[table]}`;
}

/**
 * Trims the inbox and both outboxes (see the module comment for why each retention exists).
 *
 * Refuses (throws `ConfigError`) before touching any row when the inbox retention is not longer
 * than parking retention + the budget's max age + the redrive window. Then, table by table, deletes expired rows in
 * batches of `batchSize`, each one autocommitted statement (short locks, bounded WAL and undo per
 * transaction, no long-running transaction holding back vacuum), until a batch deletes fewer than
 * `batchSize`. Stopping halfway (timeout, crash) is safe: what was deleted was expired, the rest
 * goes next time. Overlapping runs are safe too: a row deleted by one is skipped by the other.
 */
export async function runMaintenance(
  db: SqlExecutor,
  options: MaintenanceOptions,
): Promise<MaintenanceResult> {
  const { retention, budget, dryRun = false } = options;
  const batchSize = options.batchSize ?? DEFAULT_MAINTENANCE_BATCH_SIZE;
  if (!Number.isSafeInteger(batchSize) || batchSize < 1) {
    throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
  }
  validateBudget(budget, retention);

  const now = options.now ?? new Date();
  const cutoffs: Record<MaintenanceTable, Date> = {
    processed_messages: new Date(now.getTime() - retention.inboxMs),
    outbox: new Date(now.getTime() - retention.publishedOutboxMs),
    inventory_outbox: new Date(now.getTime() - retention.publishedOutboxMs),
  };

  const tables: Partial<Record<MaintenanceTable, TableMaintenanceResult>> = {};
  const chosen = options.tables ?? MAINTENANCE_TABLES;
  for (const table of MAINTENANCE_TABLES.filter((t) => chosen.includes(t))) {
    const cutoff = cutoffs[table];
    const result: TableMaintenanceResult = {
      deleted: 0,
      batches: 0,
      cutoff: cutoff.toISOString(),
    };
    if (dryRun) {
      const { rows } = await db.query<{ n: string }>(
        `SELECT count(*) AS n FROM ${table} WHERE ${EXPIRED[table]}`,
        [cutoff],
      );
      result.deleted = Number(rows[0]?.n ?? 0);
    } else {
      const sql = deleteBatchSql(table);
      for (;;) {
        const { rowCount } = await db.query(sql, [cutoff, batchSize]);
        result.batches += 1;
        result.deleted += rowCount;
        if (rowCount < batchSize) break;
      }
    }
    tables[table] = result;
  }
  return { dryRun, batchSize, tables };
}
