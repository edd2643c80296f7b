import {
  createScratchDatabase,
  proxiedDatabase,
  type ScratchDatabase,
} from '../../devkit/scratch.js';
import type { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import { DATABASE_URL, uniqueName } from './services.js';

export { proxiedDatabase };

export type TestDatabase = ScratchDatabase;

/** A fresh database of its own for one test file, migrated unless `migrated: false`. */
export function createTestDatabase(
  label: string,
  options: { migrated?: boolean; poolSize?: number } = {},
): Promise<TestDatabase> {
  return createScratchDatabase(DATABASE_URL, uniqueName(label), options);
}

/** The stock row of a SKU (available, reserved). */
export async function stockOf(db: PgDatabase, sku: string) {
  const { rows } = await db.query<{ available: number; reserved: number }>(
    'SELECT available, reserved FROM stock WHERE sku = $1',
    [sku],
  );
  return rows[0];
}

/** Inbox rows for a message id (across consumers). */
export async function inboxRows(db: PgDatabase, messageId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM processed_messages WHERE message_id = $1',
    [messageId],
  );
  return rows[0]?.n ?? 0;
}
