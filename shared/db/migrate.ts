import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DbError } from './errors.js';
import { splitStatements } from './statements.js';
import type { SqlDatabase } from './types.js';

export interface Migration {
  /** File name without extension, e.g. `0001_shipments`; applied in lexical order. */
  name: string;
  sql: string;
  checksum: string;
}

/**
 * The migrations in `dir`: its files `NNNN_<name>.sql` (lower case, digits, `_`), in lexical order.
 * A Lambda bundle built with `NodeFunction`'s `migrations` finds them at `MIGRATIONS_DIR`.
 */
export async function loadMigrations(dir: string): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f)).sort();
  return Promise.all(
    files.map(async (file) => {
      const sql = await readFile(join(dir, file), 'utf8');
      return {
        name: file.replace(/\.sql$/, ''),
        sql,
        checksum: createHash('sha256').update(sql).digest('hex'),
      };
    }),
  );
}

export interface MigrateResult {
  applied: string[];
  skipped: string[];
}

// Any constant shared by every runner: two `migrate` runs at once take turns instead of racing.
const MIGRATION_LOCK_KEY = 727_274_101;

/**
 * Migrations run unbounded: a second runner waits on the advisory lock for the first, and DDL on
 * a large table may take long (the migrate function's own timeout still ends it).
 */
const UNBOUNDED = {
  timeouts: { lockTimeoutMs: 0, statementTimeoutMs: 0, idleInTransactionTimeoutMs: 0 },
};

/**
 * Applies pending migrations in order, each in its own transaction together with its
 * `schema_migrations` row. Re-running is a no-op. A recorded migration whose file changed since
 * it was applied is refused: migrations are append-only.
 */
export async function migrate(
  db: SqlDatabase,
  migrations: readonly Migration[],
): Promise<MigrateResult> {
  const result: MigrateResult = { applied: [], skipped: [] };
  await db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await tx.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      name       text        PRIMARY KEY,
      checksum   text        NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
  }, UNBOUNDED);
  for (const m of migrations) {
    await db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
      const { rows } = await tx.query<{ checksum: string }>(
        'SELECT checksum FROM schema_migrations WHERE name = $1',
        [m.name],
      );
      const recorded = rows[0];
      if (recorded) {
        if (recorded.checksum !== m.checksum) {
          throw new DbError(
            `migration ${m.name} was changed after it was applied (checksum differs); add a new migration instead`,
          );
        }
        result.skipped.push(m.name);
        return;
      }
      // statement by statement: the RDS Data API runs one per call
      for (const statement of splitStatements(m.sql)) await tx.query(statement);
      await tx.query('INSERT INTO schema_migrations (name, checksum) VALUES ($1, $2)', [
        m.name,
        m.checksum,
      ]);
      result.applied.push(m.name);
    }, UNBOUNDED);
  }
  return result;
}
