import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { ScratchEnvironment } from '../devkit/scratch.js';
import type { Env } from '../shared/config/env.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { setStock } from '../shared/inventory/stock.js';
import { RABBITMQ_NAMES } from '../shared/pipeline/names.js';
import {
  BENCH_BACKEND,
  countOf,
  orderEvents,
  publishAmqp,
  timedReserve,
  withBenchEnvironment,
} from './environment.js';
import { progress } from './progress.js';
import { type BenchFigure, figure, median } from './report.js';

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
  scratch: ScratchEnvironment,
  o: ReserveBenchOptions,
): Promise<{ rate: number; avgBatch: number }> {
  const db = new PgDatabase({ connectionString: scratch.database.url, max: o.concurrency + 1 });
  await db.query('TRUNCATE processed_messages, reservations, inventory_outbox');
  await db.query('UPDATE stock SET reserved = 0');
  const backend = scratch.backend('rabbitmq', BENCH_BACKEND, { connectionName: 'bench-reserve' });
  // load the queue first (not timed), as the relay would have
  await backend.withChannel((ch) => ch.purgeQueue(RABBITMQ_NAMES.inventoryQueue));
  await publishAmqp(
    scratch.vhost?.amqpUrl as string,
    { exchange: RABBITMQ_NAMES.ordersExchange, routingKey: 'order.created' },
    orderEvents(o.messages, o.skus),
  );

  const { rate, stats } = await timedReserve(backend, db, o.messages, {
    mode: 'worker',
    concurrency: o.concurrency,
    prefetch: o.prefetch,
  });
  await backend.close();
  const reserved = await countOf(db, 'SELECT count(*) AS n FROM reservations');
  await db.close();
  if (reserved !== o.messages)
    throw new Error(`expected ${o.messages} reservations, got ${reserved}`);
  return { rate, avgBatch: stats.messages / stats.batches };
}

export async function benchReserveRabbit(
  env: Env,
  o: ReserveBenchOptions,
): Promise<Record<string, BenchFigure>> {
  return withBenchEnvironment(
    env,
    'reserve',
    async (scratch) => {
      const dbUrl = scratch.database.url;
      for (let i = 0; i < o.skus; i++) await setStock(scratch.database.db, `SKU-${i}`, 1_000_000);
      await scratch.backend('rabbitmq', BENCH_BACKEND).prepare('consume');
      const raw: number[] = [];
      const consumer: number[] = [];
      const avgBatch: number[] = [];
      for (let run = 1; run <= o.runs; run++) {
        raw.push(await rawTransactions(dbUrl, o.messages, o.concurrency));
        const run1 = await consumerRun(scratch, o);
        consumer.push(run1.rate);
        avgBatch.push(run1.avgBatch);
        progress(
          `  run ${run}/${o.runs}: raw single-row transactions ${Math.round(raw.at(-1) as number)}/s, reserved ${Math.round(consumer.at(-1) as number)} msg/s (${(avgBatch.at(-1) as number).toFixed(1)} per transaction)`,
        );
      }
      const value = Math.round(median(consumer));
      return {
        'reserve.rabbitmq': figure(value, 'messages/s', Math.round(median(raw)), {
          baselineName: `raw BEGIN/INSERT one row/COMMIT, ${o.concurrency} connection(s)`,
          goal: 1.0,
          messages: o.messages,
          runs: o.runs,
          concurrency: o.concurrency,
          prefetch: o.prefetch,
          skus: o.skus,
          avgMessagesPerTransaction: Math.round(median(avgBatch) * 10) / 10,
          samples: { consumer: consumer.map(Math.round), baseline: raw.map(Math.round) },
        }),
      };
    },
    { poolSize: 1 },
  );
}
