import { requireServices } from '../devkit/preflight.js';
import { loadEnv } from '../shared/config/env.js';
import { migrate } from '../shared/db/migrate.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';

/** `npm run migrate`: applies pending migrations to DATABASE_URL. */
const env = loadEnv();
await requireServices({ postgres: env.DATABASE_URL });
const db = new PgDatabase({ connectionString: env.DATABASE_URL, max: 1 });
try {
  const { applied, skipped } = await migrate(db);
  console.log(
    applied.length
      ? `applied ${applied.length} migration(s): ${applied.join(', ')} (${skipped.length} already applied)`
      : `database is up to date (${skipped.length} migration(s) applied before)`,
  );
} finally {
  await db.close();
}
