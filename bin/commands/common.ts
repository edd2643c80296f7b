import { requireServices } from '../../devkit/preflight.js';
import type { DatabaseLogin } from '../../infra/stackOutputs.js';
import { loadEnv } from '../../shared/config/env.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type { SqlDatabase } from '../../shared/db/types.js';
import { describeStack, stackDatabase } from './stack.js';

export const env = loadEnv();

/** Where a command's database is: a deployed stack's (as `login`), or `DATABASE_URL`. */
export interface DbTarget {
  /** `--stack <name>`: the stack's database through the Data API. */
  stack?: string | undefined;
  /** Whose login a deployed stack's database is reached with. */
  login: DatabaseLogin;
}

/**
 * Runs `fn` with the command's database: a deployed stack's through the RDS Data API (with the
 * secret of `login`), or a one-connection pool on DATABASE_URL, exiting 2 with a clear line if
 * that is down.
 */
export async function withDb<T>(target: DbTarget, fn: (db: SqlDatabase) => Promise<T>): Promise<T> {
  if (target.stack) {
    const { db, close } = stackDatabase(await describeStack(target.stack), target.login);
    try {
      return await fn(db);
    } finally {
      close();
    }
  }
  await requireServices({ postgres: env.DATABASE_URL });
  const db = new PgDatabase({ connectionString: env.DATABASE_URL, max: 1, applicationName: 'cli' });
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}
