import { requireServices } from '../devkit/preflight.js';
import { ensureLocalDatabase } from '../devkit/scratch.js';
import { loadEnv } from '../shared/config/env.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { migrateService, SERVICES, serviceDatabaseUrls } from '../shared/pipeline/schema.js';

/**
 * `npm run migrate`: each service's database (DATABASE_URL: orders; INVENTORY_DATABASE_URL, by
 * default beside it: inventory), created if missing, with that service's pending migrations.
 */
const env = loadEnv();
await requireServices({ postgres: env.DATABASE_URL });
const urls = serviceDatabaseUrls(env);
for (const service of SERVICES) {
  await ensureLocalDatabase(urls[service]);
  const db = new PgDatabase({ connectionString: urls[service], max: 1 });
  try {
    const { applied, skipped } = await migrateService(db, service);
    const where = `${service} (${new URL(urls[service]).pathname.slice(1)})`;
    console.log(
      applied.length
        ? `${where}: applied ${applied.length} migration(s): ${applied.join(', ')} (${skipped.length} already applied)`
        : `${where}: up to date (${skipped.length} migration(s) applied before)`,
    );
  } finally {
    await db.close();
  }
}
