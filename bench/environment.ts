import pg from 'pg';
import type { Env } from '../shared/config/env.js';
import type { Journal } from '../shared/consumer/journal.js';
import { migrate } from '../shared/db/migrate.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import {
  amqpUrlForVhost,
  RabbitManagement,
} from '../shared/transport/rabbitmq/RabbitManagement.js';

export interface BenchEnvironment {
  name: string;
  /** A migrated database of its own. */
  dbUrl: string;
  /** A virtual host of its own. */
  amqpUrl: string;
  management: RabbitManagement;
}

/** Runs one benchmark in its own database and virtual host, removed afterwards. */
export async function withBenchEnvironment<T>(
  env: Env,
  label: string,
  fn: (b: BenchEnvironment) => Promise<T>,
): Promise<T> {
  const name = `rm_bench_${label}_${process.pid}`;
  const adminUrl = new URL(env.DATABASE_URL);
  adminUrl.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: adminUrl.toString() });
  await admin.connect();
  const management = new RabbitManagement(env.RABBITMQ_MANAGEMENT_URL);
  try {
    await admin.query(`CREATE DATABASE ${name}`);
    const dbUrl = new URL(env.DATABASE_URL);
    dbUrl.pathname = `/${name}`;
    const db = new PgDatabase({ connectionString: dbUrl.toString(), max: 1 });
    await migrate(db).finally(() => db.close());
    await management.createVhost(name);
    return await fn({
      name,
      dbUrl: dbUrl.toString(),
      amqpUrl: amqpUrlForVhost(env.AMQP_URL, name),
      management,
    });
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
    await management.deleteVhost(name);
  }
}

/** Resolves once the consumer has acknowledged `count` messages (read from its journal). */
export function untilAcked(journal: Journal, count: number): Promise<void> {
  let acked = 0;
  return new Promise<void>((resolve) => {
    journal.addSink((e) => {
      if (e.step === 'acked' && ++acked === count) resolve();
    });
  });
}
