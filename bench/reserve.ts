import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import pg from 'pg';
import { DEFAULT_RETENTION, TEST_RETRY_BUDGET } from '../shared/config/budget.js';
import { RABBITMQ_NAMES, SCHEMA_VERSION_HEADER } from '../shared/config/constants.js';
import type { Env } from '../shared/config/env.js';
import { Journal } from '../shared/consumer/journal.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { encodeEnvelope, newEnvelope } from '../shared/envelope/envelope.js';
import { ReserveInventory } from '../shared/inventory/ReserveInventory.js';
import { setStock } from '../shared/inventory/stock.js';
import { RabbitConnection } from '../shared/transport/rabbitmq/RabbitConnection.js';
import { RabbitSettler } from '../shared/transport/rabbitmq/RabbitSettler.js';
import { RabbitWorker } from '../shared/transport/rabbitmq/RabbitWorker.js';
import { prepareInventoryTopology } from '../shared/transport/rabbitmq/topology.js';
import { untilAcked, withBenchEnvironment } from './environment.js';
import { type BenchFigure, median, progress } from './report.js';

export interface ReserveBenchOptions {
  messages: number;
  runs: number;
  concurrency: number;
  prefetch: number;
  /** Distinct SKUs the orders spread over: fewer means hotter stock rows (more lock waits). */
  skus: number;
}

/** Raw baseline: `concurrency` connections, each doing BEGIN; one-row INSERT; COMMIT. */
export async function rawTransactions(
  url: string,
  total: number,
  concurrency: number,
): Promise<number> {
  const clients = await Promise.all(
    Array.from({ length: concurrency }, async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      return c;
    }),
  );
  await clients[0]?.query(
    'CREATE TABLE IF NOT EXISTS bench_raw (id uuid PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())',
  );
  await clients[0]?.query('TRUNCATE bench_raw');
  let next = 0;
  const started = performance.now();
  await Promise.all(
    clients.map(async (c) => {
      while (next < total) {
        next++;
        await c.query('BEGIN');
        await c.query({
          name: 'raw_insert',
          text: 'INSERT INTO bench_raw (id) VALUES ($1)',
          values: [randomUUID()],
        });
        await c.query('COMMIT');
      }
    }),
  );
  const rate = total / ((performance.now() - started) / 1000);
  await Promise.all(clients.map((c) => c.end()));
  return rate;
}

async function consumerRun(
  dbUrl: string,
  amqpUrl: string,
  o: ReserveBenchOptions,
): Promise<{ rate: number; avgBatch: number }> {
  const db = new PgDatabase({ connectionString: dbUrl, max: o.concurrency + 1 });
  await db.query('TRUNCATE processed_messages, reservations, inventory_outbox');
  await db.query('UPDATE stock SET reserved = 0');
  // load the queue first (not timed), as the relay would have
  const conn = await amqp.connect(amqpUrl);
  const ch = await conn.createConfirmChannel();
  await ch.purgeQueue(RABBITMQ_NAMES.inventoryQueue);
  for (let i = 0; i < o.messages; i++) {
    const orderId = randomUUID();
    const e = newEnvelope({
      type: 'order.created',
      aggregate: { type: 'order', id: orderId, version: 1 },
      data: { orderId, sku: `SKU-${i % o.skus}`, quantity: 1 },
      correlationId: orderId,
      producer: 'order-service',
    });
    ch.publish(RABBITMQ_NAMES.ordersExchange, e.type, encodeEnvelope(e), {
      persistent: true,
      messageId: e.id,
      type: e.type,
      headers: { [SCHEMA_VERSION_HEADER]: e.schema_version },
    });
    if (i % 1000 === 999) await ch.waitForConfirms();
  }
  await ch.waitForConfirms();
  await conn.close();

  const journal = new Journal();
  const finished = untilAcked(journal, o.messages);
  const connection = new RabbitConnection({ url: amqpUrl, connectionName: 'bench-reserve' });
  const useCase = new ReserveInventory({ db, journal }, { budget: TEST_RETRY_BUDGET });
  const workers = Array.from(
    { length: o.concurrency },
    () =>
      new RabbitWorker(
        {
          connection,
          settler: new RabbitSettler(
            { connection },
            { budget: TEST_RETRY_BUDGET, consumer: 'bench' },
          ),
          process: (m) => useCase.process(m),
          journal,
        },
        { queue: RABBITMQ_NAMES.inventoryQueue, prefetch: o.prefetch },
      ),
  );
  const started = performance.now();
  await Promise.all(workers.map((w) => w.start()));
  await finished;
  const rate = o.messages / ((performance.now() - started) / 1000);
  await Promise.all(workers.map((w) => w.stop()));
  const batches = workers.reduce((n, w) => n + w.stats.batches, 0);
  const messages = workers.reduce((n, w) => n + w.stats.messages, 0);
  await connection.close();
  const { rows } = await db.query<{ n: string }>('SELECT count(*) AS n FROM reservations');
  await db.close();
  if (Number(rows[0]?.n) !== o.messages)
    throw new Error(`expected ${o.messages} reservations, got ${rows[0]?.n}`);
  return { rate, avgBatch: messages / batches };
}

export async function benchReserveRabbit(
  env: Env,
  o: ReserveBenchOptions,
): Promise<Record<string, BenchFigure>> {
  return withBenchEnvironment(env, 'reserve', async ({ name, dbUrl, amqpUrl, management }) => {
    const db = new PgDatabase({ connectionString: dbUrl, max: 1 });
    for (let i = 0; i < o.skus; i++) await setStock(db, `SKU-${i}`, 1_000_000);
    await db.close();
    const connection = new RabbitConnection({ url: amqpUrl });
    await prepareInventoryTopology({
      channel: (fn) => connection.withChannel(fn),
      management,
      vhost: name,
      budget: TEST_RETRY_BUDGET,
      retention: DEFAULT_RETENTION,
    });
    await connection.close();
    const raw: number[] = [];
    const consumer: number[] = [];
    const avgBatch: number[] = [];
    for (let run = 1; run <= o.runs; run++) {
      raw.push(await rawTransactions(dbUrl, o.messages, o.concurrency));
      const run1 = await consumerRun(dbUrl, amqpUrl, o);
      consumer.push(run1.rate);
      avgBatch.push(run1.avgBatch);
      progress(
        `  run ${run}/${o.runs}: raw single-row transactions ${Math.round(raw.at(-1) as number)}/s, reserved ${Math.round(consumer.at(-1) as number)} msg/s (${(avgBatch.at(-1) as number).toFixed(1)} per transaction)`,
      );
    }
    const value = Math.round(median(consumer));
    const baseline = Math.round(median(raw));
    return {
      'reserve.rabbitmq': {
        value,
        unit: 'messages/s',
        baseline,
        baselineName: `raw BEGIN/INSERT one row/COMMIT, ${o.concurrency} connection(s)`,
        ratio: Math.round((value / baseline) * 100) / 100,
        goal: 1.0,
        messages: o.messages,
        runs: o.runs,
        concurrency: o.concurrency,
        prefetch: o.prefetch,
        skus: o.skus,
        avgMessagesPerTransaction: Math.round(median(avgBatch) * 10) / 10,
        samples: { consumer: consumer.map(Math.round), baseline: raw.map(Math.round) },
      },
    };
  });
}
