import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import type { ScratchEnvironment } from '../devkit/scratch.js';
import type { Env } from '../shared/config/env.js';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { type Envelope, encodeEnvelope, newEnvelope } from '../shared/envelope/envelope.js';
import { OutboxRelay } from '../shared/outbox/OutboxRelay.js';
import { OutboxStore } from '../shared/outbox/OutboxStore.js';
import { RABBITMQ_NAMES, SCHEMA_VERSION_HEADER } from '../shared/transport/rabbitmq/constants.js';
import { BENCH_BACKEND, withBenchEnvironment } from './environment.js';
import { progress } from './progress.js';
import { type BenchFigure, median } from './report.js';

export interface RelayBenchOptions {
  messages: number;
  runs: number;
  batchSize: number;
  concurrency: number;
  window: number;
}

function makeEnvelopes(n: number): Envelope[] {
  return Array.from({ length: n }, (_, i) => {
    const orderId = randomUUID();
    return newEnvelope({
      type: 'order.created',
      aggregate: { type: 'order', id: orderId, version: 1 },
      data: { orderId, sku: `SKU-${i % 100}`, quantity: 1 + (i % 5) },
      correlationId: randomUUID(),
      producer: 'order-service',
    });
  });
}

/**
 * Raw baseline: amqplib on a confirm channel, publishing the same messages with the same
 * properties to the same exchange and queues, `window` confirms outstanding, no database.
 */
async function rawPublish(amqpUrl: string, envelopes: Envelope[], window: number): Promise<number> {
  const conn = await amqp.connect(amqpUrl);
  const ch = await conn.createConfirmChannel();
  const started = performance.now();
  let inFlight = 0;
  let wake: (() => void) | undefined;
  let failed = 0;
  const done = () => {
    inFlight--;
    const w = wake;
    wake = undefined;
    w?.();
  };
  for (const e of envelopes) {
    while (inFlight >= window) await new Promise<void>((r) => (wake = r));
    inFlight++;
    ch.publish(
      RABBITMQ_NAMES.ordersExchange,
      e.type,
      encodeEnvelope(e),
      {
        persistent: true,
        mandatory: true,
        contentType: 'application/json',
        messageId: e.id,
        type: e.type,
        correlationId: e.correlation_id,
        headers: { [SCHEMA_VERSION_HEADER]: e.schema_version },
      },
      (err: unknown) => {
        if (err) failed++;
        done();
      },
    );
  }
  await ch.waitForConfirms();
  const seconds = (performance.now() - started) / 1000;
  await conn.close();
  if (failed) throw new Error(`raw publish: ${failed} messages failed`);
  return envelopes.length / seconds;
}

async function insertRows(db: PgDatabase, envelopes: Envelope[]): Promise<void> {
  const store = new OutboxStore('outbox');
  for (let i = 0; i < envelopes.length; i += 1000) {
    await db.transaction(async (tx) => {
      for (const e of envelopes.slice(i, i + 1000)) await store.append(tx, e);
    });
  }
}

async function relayDrain(
  db: PgDatabase,
  scratch: ScratchEnvironment,
  o: RelayBenchOptions,
  expected: number,
): Promise<number> {
  const backend = scratch.backend('rabbitmq', BENCH_BACKEND, {
    connectionName: 'bench-relay',
    publish: { window: o.window },
  });
  const publisher = backend.publisher('outbox');
  const relay = new OutboxRelay(
    { db, publisher },
    { table: 'outbox', batchSize: o.batchSize, maxAttempts: 10 },
  );
  await publisher.ready();
  const started = performance.now();
  const result = await relay.drain({
    budgetMs: 600_000,
    idleWaitMs: 1,
    concurrency: o.concurrency,
    stopWhenIdle: true,
  });
  const seconds = (performance.now() - started) / 1000;
  await backend.close();
  if (result.published !== expected)
    throw new Error(`relay published ${result.published} of ${expected}`);
  return expected / seconds;
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

export async function benchRelayRabbit(
  env: Env,
  o: RelayBenchOptions,
): Promise<Record<string, BenchFigure>> {
  return withBenchEnvironment(
    env,
    'relay',
    async (scratch) => {
      const db = scratch.database.db;
      const amqpUrl = scratch.vhost?.amqpUrl as string;
      const purge = await orderQueuesPurger(scratch);
      const raw: number[] = [];
      const relay: number[] = [];
      for (let run = 1; run <= o.runs; run++) {
        const envelopes = makeEnvelopes(o.messages);
        await purge();
        raw.push(await rawPublish(amqpUrl, envelopes, o.window));
        await purge();
        await db.query('TRUNCATE outbox');
        await insertRows(db, envelopes);
        await db.query('VACUUM ANALYZE outbox');
        relay.push(await relayDrain(db, scratch, o, envelopes.length));
        progress(
          `  run ${run}/${o.runs}: raw publish ${Math.round(raw.at(-1) as number)} msg/s, relay ${Math.round(relay.at(-1) as number)} events/s`,
        );
      }
      await purge();
      const value = Math.round(median(relay));
      const baseline = Math.round(median(raw));
      return {
        'relay.rabbitmq': {
          value,
          unit: 'events/s',
          baseline,
          baselineName: 'raw amqplib confirm-channel publish, same messages, same window',
          ratio: Math.round((value / baseline) * 100) / 100,
          goal: 0.5,
          messages: o.messages,
          runs: o.runs,
          batchSize: o.batchSize,
          concurrency: o.concurrency,
          window: o.window,
          samples: { relay: relay.map(Math.round), baseline: raw.map(Math.round) },
        },
      };
    },
    { poolSize: o.concurrency + 2 },
  );
}
