import pg from 'pg';
import { migrate } from '../shared/db/migrate.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import type { BackendBase } from '../shared/transport/index.js';
import {
  type MemoryBackend,
  type MemoryBackendConfig,
  memoryBackend,
} from '../shared/transport/memory/index.js';
import {
  amqpUrlForVhost,
  RabbitManagement,
  type RabbitMqBackend,
  type RabbitMqBackendConfig,
  rabbitmqBackend,
} from '../shared/transport/rabbitmq/index.js';
import {
  type SqsBackend,
  type SqsBackendConfig,
  sqsBackend,
} from '../shared/transport/sqs/index.js';
import { TcpProxy } from './tcpProxy.js';

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

export interface ScratchVhost {
  vhost: string;
  amqpUrl: string;
  /** The management API URL (with credentials) the vhost was created through. */
  managementUrl: string;
  management: RabbitManagement;
  delete(): Promise<void>;
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

/** Creates database `name` next to `baseUrl`'s, migrated unless `migrated: false`. */
export async function createScratchDatabase(
  baseUrl: string,
  name: string,
  options: { migrated?: boolean; poolSize?: number } = {},
): Promise<ScratchDatabase> {
  await admin(baseUrl, (c) => c.query(`CREATE DATABASE ${name}`));
  const url = withDatabase(baseUrl, name);
  const db = new PgDatabase({
    connectionString: url,
    max: options.poolSize ?? 10,
    applicationName: name,
  });
  if (options.migrated !== false) await migrate(db);
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
    ...(options.statementTimeoutMillis
      ? { statementTimeoutMillis: options.statementTimeoutMillis }
      : {}),
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

/** Creates virtual host `name` (the management user gets full permissions on it). */
export async function createScratchVhost(
  managementUrl: string,
  amqpUrl: string,
  name: string,
): Promise<ScratchVhost> {
  const management = new RabbitManagement(managementUrl);
  await management.createVhost(name);
  return {
    vhost: name,
    amqpUrl: amqpUrlForVhost(amqpUrl, name),
    managementUrl,
    management,
    delete: () => management.deleteVhost(name),
  };
}

/** An AMQP URL pointing at `127.0.0.1:port` (e.g. a proxy) for the given vhost. */
export function amqpUrlVia(amqpUrl: string, port: number, vhost: string): string {
  const u = new URL(amqpUrlForVhost(amqpUrl, vhost));
  u.hostname = '127.0.0.1';
  u.port = String(port);
  return u.toString();
}

/** Where the services are (tests: the global setup's; the lab, the soak, the benchmarks: env). */
export interface Services {
  databaseUrl: string;
  amqpUrl: string;
  managementUrl: string;
  /** An SQS-compatible endpoint (fauxqs, moto); needed for SQS backends only. */
  sqsEndpoint?: string | undefined;
}

/**
 * Everything of its own one test file, lab run, soak or benchmark needs: a migrated database, a
 * RabbitMQ virtual host (when asked), and an SQS queue prefix; plus backends configured on exactly
 * that namespace. `close` removes all of it (unless `keep`).
 */
export interface ScratchEnvironment {
  name: string;
  database: ScratchDatabase;
  vhost: ScratchVhost | undefined;
  /** Queue-name prefix for SQS backends of this environment (`rm-…-`). */
  sqsPrefix: string;
  services: Services;
  /**
   * A backend on this environment's namespace: RabbitMQ on its vhost, SQS with its prefix on
   * `services.sqsEndpoint`, or in memory. `overrides` go into the backend's configuration.
   */
  backend<T extends 'rabbitmq' | 'sqs' | 'memory'>(
    transport: T,
    base: BackendBase,
    overrides?: T extends 'rabbitmq'
      ? Partial<RabbitMqBackendConfig>
      : T extends 'sqs'
        ? Partial<SqsBackendConfig>
        : Partial<MemoryBackendConfig>,
  ): T extends 'rabbitmq' ? RabbitMqBackend : T extends 'sqs' ? SqsBackend : MemoryBackend;
  close(): Promise<void>;
}

export async function createScratch(
  services: Services,
  label: string,
  options: {
    /** Create a virtual host too (any RabbitMQ backend needs one). Default true. */
    vhost?: boolean;
    migrated?: boolean;
    poolSize?: number;
    /** Leave the database and vhost in place at close (inspection after a failed soak). */
    keep?: boolean;
    /** Use exactly this name instead of a fresh unique one. */
    name?: string;
  } = {},
): Promise<ScratchEnvironment> {
  const name = options.name ?? scratchName(label);
  const database = await createScratchDatabase(services.databaseUrl, name, {
    ...(options.migrated !== undefined ? { migrated: options.migrated } : {}),
    ...(options.poolSize !== undefined ? { poolSize: options.poolSize } : {}),
  });
  let vhost: ScratchVhost | undefined;
  try {
    if (options.vhost !== false) {
      vhost = await createScratchVhost(services.managementUrl, services.amqpUrl, name);
    }
  } catch (err) {
    await database.drop().catch(() => {});
    throw err;
  }
  const sqsPrefix = `${name.replace(/_/g, '-')}-`;
  const backends: { close(): Promise<void> }[] = [];
  const env: ScratchEnvironment = {
    name,
    database,
    vhost,
    sqsPrefix,
    services,
    backend(transport, base, overrides) {
      let b: RabbitMqBackend | SqsBackend | MemoryBackend;
      if (transport === 'rabbitmq') {
        if (!vhost) throw new Error('this scratch environment has no virtual host');
        b = rabbitmqBackend({
          url: vhost.amqpUrl,
          managementUrl: vhost.managementUrl,
          vhost: vhost.vhost,
          connectionName: name,
          ...base,
          ...(overrides as Partial<RabbitMqBackendConfig>),
        });
      } else if (transport === 'sqs') {
        if (!services.sqsEndpoint) throw new Error('no SQS endpoint for this scratch environment');
        b = sqsBackend({
          endpoint: services.sqsEndpoint,
          region: 'us-east-1',
          prefix: sqsPrefix,
          mode: 'visibility',
          ...base,
          ...(overrides as Partial<SqsBackendConfig>),
        });
      } else {
        b = memoryBackend({
          consumer: base.consumer,
          ...(overrides as Partial<MemoryBackendConfig>),
        });
      }
      backends.push(b);
      return b as never;
    },
    async close() {
      for (const b of backends.reverse()) await b.close().catch(() => {});
      if (options.keep) {
        await database.db.close().catch(() => {});
        return;
      }
      await Promise.all([database.drop(), vhost?.delete()].map((p) => p?.catch(() => {})));
    },
  };
  return env;
}
