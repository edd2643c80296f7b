import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { type ConsumerSettings, startConsumer } from '../devkit/consumers.js';
import { createScratch, type ScratchEnvironment } from '../devkit/scratch.js';
import { DEFAULT_RETENTION, TEST_RETRY_BUDGET } from '../shared/config/budget.js';
import type { Env } from '../shared/config/env.js';
import { Journal } from '../shared/consumer/journal.js';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import type { SqlExecutor } from '../shared/db/types.js';
import { type Envelope, encodeEnvelope, newEnvelope } from '../shared/envelope/envelope.js';
import { ReserveInventory } from '../shared/inventory/ReserveInventory.js';
import { OutboxRelay } from '../shared/outbox/OutboxRelay.js';
import { OutboxStore } from '../shared/outbox/OutboxStore.js';
import { RABBITMQ_NAMES } from '../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../shared/pipeline/topology.js';
import type { Backend, Publisher, RunningConsumer } from '../shared/port/types.js';
import type { BackendBase, TransportName } from '../shared/transport/index.js';
import { SCHEMA_VERSION_HEADER } from '../shared/transport/rabbitmq/constants.js';

/** What every benchmark's backends are built with: the tests' short retry ladder. */
export const BENCH_BACKEND: BackendBase = {
  budget: TEST_RETRY_BUDGET,
  retention: DEFAULT_RETENTION,
  topology: PIPELINE_TOPOLOGY,
  consumer: 'bench',
};

/**
 * Runs one benchmark in a scratch environment of its own (a migrated database, a virtual host
 * and a namespace on each of `transports` (default: all), an SQS prefix on `sqsEndpoint`), removed
 * afterwards.
 */
export async function withBenchEnvironment<T>(
  env: Env,
  label: string,
  fn: (scratch: ScratchEnvironment) => Promise<T>,
  options: { poolSize?: number; transports?: readonly TransportName[]; sqsEndpoint?: string } = {},
): Promise<T> {
  const scratch = await createScratch(
    {
      databaseUrl: env.DATABASE_URL,
      amqpUrl: env.AMQP_URL,
      managementUrl: env.RABBITMQ_MANAGEMENT_URL,
      sqsEndpoint: options.sqsEndpoint,
    },
    `bench_${label}`,
    {
      ...(options.poolSize !== undefined ? { poolSize: options.poolSize } : {}),
      ...(options.transports ? { transports: options.transports } : {}),
    },
  );
  try {
    return await fn(scratch);
  } finally {
    await scratch.close();
  }
}

/**
 * Our reserve consumer on `backend`, `messages` already queued: messages per second until it has
 * acknowledged them all (read from its journal), and its stats.
 */
export async function timedReserve(
  backend: Backend,
  db: PgDatabase,
  messages: number,
  settings: Omit<ConsumerSettings, 'journal'>,
): Promise<{ rate: number; stats: RunningConsumer['stats'] }> {
  const journal = new Journal();
  let acked = 0;
  const finished = new Promise<void>((resolve) => {
    journal.addSink((e) => {
      if (e.step === 'acked' && ++acked === messages) resolve();
    });
  });
  const useCase = new ReserveInventory({ db, journal }, { budget: TEST_RETRY_BUDGET });
  const started = performance.now();
  const consumer = await startConsumer(backend, (m) => useCase.process(m), {
    ...settings,
    journal,
  });
  await finished;
  const rate = messages / ((performance.now() - started) / 1000);
  await consumer.stop();
  return { rate, stats: consumer.stats };
}

/** `n` order.created events, one unit each, spread over `skus` SKUs from the `first`'s on. */
export function orderEvents(n: number, skus: number, first = 0): Envelope[] {
  return Array.from({ length: n }, (_, i) => {
    const orderId = randomUUID();
    return newEnvelope({
      type: 'order.created',
      aggregate: { type: 'order', id: orderId, version: 1 },
      data: { orderId, sku: `SKU-${(first + i) % skus}`, quantity: 1 },
      correlationId: orderId,
      producer: 'order-service',
    });
  });
}

/** The count a `SELECT count(*) AS n …` query answers. */
export async function countOf(db: SqlExecutor, sql: string): Promise<number> {
  const { rows } = await db.query<{ n: number | string }>(sql);
  return Number(rows[0]?.n);
}

/** Writes the events into `outbox`, 1000 rows a transaction (not timed). */
export async function insertOutbox(db: PgDatabase, envelopes: readonly Envelope[]): Promise<void> {
  const store = new OutboxStore('outbox');
  for (let i = 0; i < envelopes.length; i += 1000) {
    await db.transaction((tx) => store.appendMany(tx, envelopes.slice(i, i + 1000)));
  }
}

/** A worker's relay loop draining `expected` outbox rows through `publisher`: events per second. */
export async function timedDrain(
  db: PgDatabase,
  publisher: Publisher,
  o: { batchSize: number; concurrency: number },
  expected: number,
): Promise<number> {
  const relay = new OutboxRelay(
    { db, publisher },
    { table: 'outbox', batchSize: o.batchSize, maxAttempts: 10 },
  );
  const started = performance.now();
  const r = await relay.drain({
    budgetMs: 600_000,
    idleWaitMs: 1,
    concurrency: o.concurrency,
    stopWhenIdle: true,
  });
  const seconds = (performance.now() - started) / 1000;
  if (r.published !== expected) throw new Error(`relay published ${r.published} of ${expected}`);
  return expected / seconds;
}

/** Publishes the envelopes on a confirm channel (persistent, JSON, message id), not timed. */
export async function publishAmqp(
  amqpUrl: string,
  input: { exchange: string; routingKey: string },
  envelopes: Envelope[],
): Promise<void> {
  const conn = await amqp.connect(amqpUrl);
  try {
    const ch = await conn.createConfirmChannel();
    for (const [i, e] of envelopes.entries()) {
      ch.publish(input.exchange, input.routingKey, encodeEnvelope(e), {
        persistent: true,
        contentType: 'application/json',
        messageId: e.id,
        type: e.type,
        headers: { [SCHEMA_VERSION_HEADER]: e.schema_version },
      });
      if (i % 1000 === 999) await ch.waitForConfirms();
    }
    await ch.waitForConfirms();
  } finally {
    await conn.close();
  }
}

/**
 * The run's broker topology declared for publishing, and a function that empties the queues the
 * `orders` exchange routes to (between runs, so each starts from empty queues).
 */
export async function orderQueuesPurger(scratch: ScratchEnvironment): Promise<() => Promise<void>> {
  const broker = scratch.backend('rabbitmq', BENCH_BACKEND, { connectionName: 'bench-setup' });
  await broker.prepare('publish');
  return () =>
    broker.withChannel(async (ch) => {
      await ch.purgeQueue(RABBITMQ_NAMES.inventoryQueue);
      await ch.purgeQueue(RABBITMQ_NAMES.auditQueue);
    });
}
