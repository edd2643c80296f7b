import { loadEnv } from '../shared/config/env.js';
import { migrate } from '../shared/db/migrate.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { checkPostgres, describeProblem } from '../shared/local/preflight.js';

/** `npm run migrate`: applies pending migrations to DATABASE_URL. */
const env = loadEnv();
const problem = await checkPostgres(env.DATABASE_URL);
if (problem) {
  console.error(describeProblem(problem));
  process.exit(2);
}
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
