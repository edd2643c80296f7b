import pg from 'pg';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import {
  ensureDatabase,
  inventoryDatabaseUrl,
  migrateBothServices,
  migrateService,
  type Service,
} from '../shared/pipeline/schema.js';
import {
  type BackendBase,
  type BackendOf,
  type ConfigOf,
  createBackend,
  TRANSPORT_NAMES,
  type TransportName,
} from '../shared/transport/index.js';
import { TcpProxy } from './TcpProxy.js';
import { localTransport, type Namespace, type Services } from './transports/index.js';
import type { ScratchVhost } from './transports/types.js';

export type { Services } from './transports/index.js';
/**
 * Throw-away resources of their own for one test file or one lab run (a database, a RabbitMQ
 * virtual host), so that runs in parallel never share state and can be repeated.
 */
export interface ScratchDatabase {
  name: string;
  url: string;
  db: PgDatabase;
  drop(): Promise<void>;
}

/** A short, unique, lowercase name (a valid database, vhost and SQS queue-prefix name). */
export function scratchName(prefix: string): string {
  const slug = prefix
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .slice(0, 30);
  return `rm_${slug}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function admin<T>(baseUrl: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: withDatabase(baseUrl, 'postgres') });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * Creates the database `url` names on its server, unless it exists (the local services' own:
 * `npm run dev` and `npm run migrate` on a fresh server), as the migrate function does deployed.
 */
export async function ensureLocalDatabase(url: string): Promise<void> {
  const server = new PgDatabase({ connectionString: withDatabase(url, 'postgres'), max: 1 });
  try {
    await ensureDatabase(server, decodeURIComponent(new URL(url).pathname.slice(1)));
  } finally {
    await server.close();
  }
}

/**
 * Creates database `name` next to `baseUrl`'s, migrated unless `migrated: false`: with one
 * service's schema (`service`), else with both services' in this one database.
 */
export async function createScratchDatabase(
  baseUrl: string,
  name: string,
  options: { migrated?: boolean; poolSize?: number; service?: Service } = {},
): Promise<ScratchDatabase> {
  await admin(baseUrl, (c) => c.query(`CREATE DATABASE ${name}`));
  const url = withDatabase(baseUrl, name);
  const db = new PgDatabase({
    connectionString: url,
    max: options.poolSize ?? 10,
    applicationName: name,
  });
  if (options.migrated !== false) {
    await (options.service ? migrateService(db, options.service) : migrateBothServices(db));
  }
  return {
    name,
    url,
    db,
    async drop() {
      await db.close();
      await admin(baseUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

/**
 * A pool on `url` through a TCP proxy that can be cut ("database down") without touching the
 * server everyone else shares.
 */
export async function proxiedDatabase(
  url: string,
  options: { statementTimeoutMillis?: number } = {},
): Promise<{ db: PgDatabase; proxy: TcpProxy; url: string; close(): Promise<void> }> {
  const target = new URL(url);
  const proxy = await new TcpProxy(target.hostname, Number(target.port || 5432)).start();
  target.hostname = '127.0.0.1';
  target.port = String(proxy.port);
  const db = new PgDatabase({
    connectionString: target.toString(),
    max: 4,
    connectionTimeoutMillis: 1_000,
    statementTimeoutMillis: options.statementTimeoutMillis,
  });
  return {
    db,
    proxy,
    url: target.toString(),
    async close() {
      await db.close();
      await proxy.close();
    },
  };
}

/**
 * Everything of its own one test file, lab run, soak or benchmark needs: a migrated database, and
 * a namespace on each transport asked for (a RabbitMQ virtual host, an SQS queue prefix, …); plus
 * backends configured on exactly that namespace. `close` removes all of it (unless `keep`).
 */
export interface ScratchEnvironment {
  name: string;
  /**
   * The order service's database; with `layout: 'one'` (the default) both services' schemas are
   * in it (tests of both sides on one database).
   */
  database: ScratchDatabase;
  /**
   * Each service's database (`layout: 'services'`: the inventory one is
   * `<name>_inventory`, as `inventoryDatabaseUrl` names it; `'one'`: both are `database`).
   */
  databases: Readonly<Record<Service, ScratchDatabase>>;
  /** The RabbitMQ virtual host, when RabbitMQ is among the environment's transports. */
  vhost: ScratchVhost | undefined;
  /** Queue-name prefix for SQS backends of this environment (`rm-…-`). */
  sqsPrefix: string;
  services: Services;
  /**
   * A backend of a registered transport on this environment's namespace, built through the
   * registry; `overrides` go into its configuration.
   */
  backend<N extends TransportName>(
    transport: N,
    base: BackendBase,
    overrides?: Partial<ConfigOf<N>>,
  ): BackendOf<N>;
  close(): Promise<void>;
}

export async function createScratch(
  services: Services,
  label: string,
  options: {
    /** The transports to make a namespace on (default: every registered one). */
    transports?: readonly TransportName[];
    migrated?: boolean;
    poolSize?: number;
    /** Leave the database and the namespaces in place at close (inspection after a failed soak). */
    keep?: boolean;
    /** Use exactly this name instead of a fresh unique one. */
    name?: string;
    /** Both services' schemas in one database (default), or each in its own (as they run). */
    layout?: 'one' | 'services';
  } = {},
): Promise<ScratchEnvironment> {
  const name = options.name ?? scratchName(label);
  const split = options.layout === 'services';
  const database = await createScratchDatabase(services.databaseUrl, name, {
    ...options,
    ...(split ? { service: 'orders' as const } : {}),
  });
  let databases: Record<Service, ScratchDatabase> = { orders: database, inventory: database };
  if (split) {
    const inventoryName = new URL(
      inventoryDatabaseUrl({ DATABASE_URL: database.url }),
    ).pathname.slice(1);
    try {
      databases = {
        orders: database,
        inventory: await createScratchDatabase(services.databaseUrl, inventoryName, {
          ...options,
          service: 'inventory',
        }),
      };
    } catch (err) {
      await database.drop().catch(() => {});
      throw err;
    }
  }
  const dropAll = () =>
    Promise.all([...new Set(Object.values(databases))].map((d) => d.drop().catch(() => {})));
  const namespaces = new Map<string, Namespace>();
  try {
    for (const t of options.transports ?? TRANSPORT_NAMES) {
      namespaces.set(t, await localTransport(t).namespace(services, name));
    }
  } catch (err) {
    for (const n of namespaces.values()) await n.delete().catch(() => {});
    await dropAll();
    throw err;
  }
  const backends: { close(): Promise<void> }[] = [];
  return {
    name,
    database,
    databases,
    vhost: [...namespaces.values()].find((n) => n.vhost)?.vhost,
    sqsPrefix: `${name.replace(/_/g, '-')}-`,
    services,
    backend(transport, base, overrides) {
      const namespace = namespaces.get(transport);
      if (!namespace) throw new Error(`this scratch environment has no ${transport} namespace`);
      const b = createBackend(transport, {
        ...namespace.config,
        ...base,
        ...overrides,
      } as ConfigOf<typeof transport>);
      backends.push(b);
      return b;
    },
    async close() {
      for (const b of backends.reverse()) await b.close().catch(() => {});
      if (options.keep) {
        for (const d of new Set(Object.values(databases))) await d.db.close().catch(() => {});
        return;
      }
      await Promise.all([
        dropAll(),
        ...[...namespaces.values()].map((n) => n.delete().catch(() => {})),
      ]);
    },
  };
}
