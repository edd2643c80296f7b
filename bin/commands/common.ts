import { requireServices } from '../../devkit/preflight.js';
import { loadEnv } from '../../shared/config/env.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';

export const env = loadEnv();

/** Runs `fn` with a one-connection pool on DATABASE_URL; exits 2 with a clear line if it is down. */
export async function withDb<T>(fn: (db: PgDatabase) => Promise<T>): Promise<T> {
  await requireServices({ postgres: env.DATABASE_URL });
  const db = new PgDatabase({ connectionString: env.DATABASE_URL, max: 1, applicationName: 'cli' });
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}
