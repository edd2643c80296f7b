import { fileURLToPath } from 'node:url';
import {
  ConfigError,
  DbError,
  libraryMigrations,
  loadEnv,
  loadMigrations,
  type MigrateResult,
  type Migration,
  migrate,
  type SqlDatabase,
} from '../index.js';

/**
 * The example's two services, each with a database of its own: the order service (orders, its
 * outbox, its inbox for inventory's results) and inventory (stock, reservations, its inbox, its
 * outbox). Neither reads the other's database; events are their only link.
 */
export const SERVICES = ['orders', 'inventory'] as const;
export type Service = (typeof SERVICES)[number];

/** Each service's outbox table (the library's table, `libraryMigrations`). */
export const OUTBOX_OF = {
  orders: 'outbox',
  inventory: 'inventory_outbox',
} as const satisfies Record<Service, string>;

/**
 * The services' own migrations, one folder for both (a Lambda bundle ships it flat): a file
 * `NNNN_<service>_<what>.sql` belongs to `<service>`.
 */
export const SERVICE_MIGRATIONS_DIR = fileURLToPath(new URL('./migrations', import.meta.url));

/** What a migrations folder of the single-database layout (before the services split) recorded. */
const SINGLE_DATABASE_LAYOUT = '0001_orders_and_outbox';

/**
 * A service's migrations, in the order `migrate` applies them: the library's tables (its inbox and
 * its outbox), then its own files of `dir` (default: `MIGRATIONS_DIR`, else this checkout's).
 */
export async function serviceMigrations(
  service: Service,
  dir: string = loadEnv().MIGRATIONS_DIR ?? SERVICE_MIGRATIONS_DIR,
): Promise<Migration[]> {
  const own = (await loadMigrations(dir)).filter((m) =>
    new RegExp(`^\\d{4}_${service}_`).test(m.name),
  );
  if (own.length === 0) throw new DbError(`no migrations of the ${service} service in ${dir}`);
  return [...libraryMigrations({ outboxes: [OUTBOX_OF[service]] }), ...own];
}

/**
 * Both services' migrations for one database, each once (their inbox is one table, keyed by
 * consumer name): the layout of tests that exercise both sides on one scratch database, and of
 * the end-to-end benchmark (it reads both sides' timestamps in one query). The services run each
 * on its own database in `npm run dev`, the lab, the soak and a deployment.
 */
export async function bothServicesMigrations(dir?: string): Promise<Migration[]> {
  const all = (await Promise.all(SERVICES.map((s) => serviceMigrations(s, dir)))).flat();
  return all.filter((m, i) => all.findIndex((o) => o.name === m.name) === i);
}

/** Refuses a database of the single-database layout (see `migrateService`). */
async function refuseSingleDatabaseLayout(db: SqlDatabase): Promise<void> {
  const { rows } = await db.query<{ found: boolean }>(
    "SELECT to_regclass('schema_migrations') IS NOT NULL AS found",
  );
  if (!rows[0]?.found) return;
  const old = await db.query('SELECT 1 FROM schema_migrations WHERE name = $1', [
    SINGLE_DATABASE_LAYOUT,
  ]);
  if (old.rows.length > 0) {
    throw new DbError(
      `this database holds the single-database layout (migration ${SINGLE_DATABASE_LAYOUT}); each service now owns a database: see docs/deploy.md, "Upgrading"`,
    );
  }
}

/**
 * Applies a service's migrations to its database. Refuses a database of the single-database
 * layout, where both services' tables were one schema: its history is not this one's
 * (docs/deploy.md, "Upgrading").
 */
export async function migrateService(
  db: SqlDatabase,
  service: Service,
  dir?: string,
): Promise<MigrateResult> {
  await refuseSingleDatabaseLayout(db);
  return migrate(db, await serviceMigrations(service, dir));
}

/** Both services' schemas in one database ({@link bothServicesMigrations}). */
export async function migrateBothServices(db: SqlDatabase, dir?: string): Promise<MigrateResult> {
  await refuseSingleDatabaseLayout(db);
  return migrate(db, await bothServicesMigrations(dir));
}

/** Where each service's database is, for node-postgres: the settings `loadEnv` reads. */
export interface ServiceDatabaseSettings {
  DATABASE_URL: string;
  INVENTORY_DATABASE_URL?: string | undefined;
}

/**
 * The inventory service's database: `INVENTORY_DATABASE_URL`, else the order service's server
 * with its database name suffixed `_inventory` (`…/reliable_messaging` → `…/reliable_messaging_inventory`).
 */
export function inventoryDatabaseUrl(env: ServiceDatabaseSettings): string {
  if (env.INVENTORY_DATABASE_URL) return env.INVENTORY_DATABASE_URL;
  const url = new URL(env.DATABASE_URL);
  const name = decodeURIComponent(url.pathname.replace(/^\//, '')) || 'postgres';
  url.pathname = `/${encodeURIComponent(`${name}_inventory`)}`;
  return url.toString();
}

/** Each service's database URL (node-postgres): the order service's is `DATABASE_URL`. */
export function serviceDatabaseUrls(env: ServiceDatabaseSettings): Record<Service, string> {
  return { orders: env.DATABASE_URL, inventory: inventoryDatabaseUrl(env) };
}

/**
 * Creates database `name` on the server `db` is connected to, unless it exists. `CREATE DATABASE`
 * cannot run in a transaction: it is sent on its own, outside one (through the Data API, a call
 * without a transaction id: docs/aws-facts.md). The server quotes the name (`format('%I')`), so
 * no value is spliced into SQL here. Another run creating it at the same moment is tolerated.
 */
export async function ensureDatabase(db: SqlDatabase, name: string): Promise<boolean> {
  if (name === '' || Buffer.byteLength(name) > 63) {
    throw new ConfigError(`database name "${name}": expected 1 to 63 bytes`);
  }
  const exists = async () =>
    (await db.query('SELECT 1 FROM pg_database WHERE datname = $1::text', [name])).rows.length > 0;
  if (await exists()) return false;
  const { rows } = await db.query<{ sql: string }>(
    "SELECT format('CREATE DATABASE %I', $1::text) AS sql",
    [name],
  );
  try {
    await db.query(rows[0]?.sql as string);
  } catch (err) {
    // duplicate_database (or the catalog's unique index): created by a concurrent run
    if (await exists()) return false;
    throw err;
  }
  return true;
}
