import pg from 'pg';
import { migrate } from '../../shared/db/migrate.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import { DATABASE_URL, uniqueName } from './services.js';
import { TcpProxy } from './tcpProxy.js';

export interface TestDatabase {
  name: string;
  url: string;
  db: PgDatabase;
  drop(): Promise<void>;
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: withDatabase(DATABASE_URL, 'postgres') });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** A fresh database of its own for one test file, migrated unless `migrated: false`. */
export async function createTestDatabase(
  label: string,
  options: { migrated?: boolean; poolSize?: number } = {},
): Promise<TestDatabase> {
  const name = uniqueName(label);
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  const url = withDatabase(DATABASE_URL, name);
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
      await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

/**
 * A pool on `url` through a TCP proxy the test can cut ("database down") without touching the
 * server every other test file shares.
 */
export async function proxiedDatabase(
  url: string,
): Promise<{ db: PgDatabase; proxy: TcpProxy; close(): Promise<void> }> {
  const target = new URL(url);
  const proxy = await new TcpProxy(target.hostname, Number(target.port || 5432)).start();
  target.hostname = '127.0.0.1';
  target.port = String(proxy.port);
  const db = new PgDatabase({
    connectionString: target.toString(),
    max: 4,
    connectionTimeoutMillis: 1_000,
  });
  return {
    db,
    proxy,
    async close() {
      await db.close();
      await proxy.close();
    },
  };
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
