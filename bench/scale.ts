import { randomUUID } from 'node:crypto';
import { TEST_RETRY_BUDGET } from '../shared/config/budget.js';
import { RABBITMQ_NAMES } from '../shared/config/constants.js';
import type { Env } from '../shared/config/env.js';
import type { InboundMessage } from '../shared/consumer/types.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { encodeEnvelope, newEnvelope } from '../shared/envelope/envelope.js';
import { ReserveInventory } from '../shared/inventory/ReserveInventory.js';
import { setStock } from '../shared/inventory/stock.js';
import { OutboxRelay } from '../shared/outbox/OutboxRelay.js';
import { OutboxStore } from '../shared/outbox/OutboxStore.js';
import { RabbitConnection } from '../shared/transport/rabbitmq/RabbitConnection.js';
import { RabbitPublisher } from '../shared/transport/rabbitmq/RabbitPublisher.js';
import { declareTopology } from '../shared/transport/rabbitmq/topology.js';
import { withBenchEnvironment } from './environment.js';
import { quantile, round2 } from './load.js';
import { type BenchFigure, figure, median, progress } from './report.js';

export interface ScaleOptions {
  /** Rows already in `outbox` (published) and in the inbox for the "full" measurement. */
  rows: number;
  /** Relay rounds, and reserve calls, measured in each state. */
  samples: number;
  batchSize: number;
}

const SKUS = 100;

function orderCreated(i: number) {
  const orderId = randomUUID();
  return newEnvelope({
    type: 'order.created',
    aggregate: { type: 'order', id: orderId, version: 1 },
    data: { orderId, sku: `SKU-${i % SKUS}`, quantity: 1 },
    correlationId: orderId,
    producer: 'order-service',
  });
}

/** Fills `table` with `rows` rows in chunks (INSERT … SELECT generate_series), with progress. */
async function fill(db: PgDatabase, what: string, rows: number, sql: string): Promise<void> {
  const chunk = 200_000;
  const started = performance.now();
  for (let from = 1; from <= rows; from += chunk) {
    const to = Math.min(rows, from + chunk - 1);
    await db.query(sql, [from, to]);
    progress(
      `    ${what}: ${to.toLocaleString('en')} / ${rows.toLocaleString('en')} rows (${Math.round((performance.now() - started) / 1000)} s)`,
    );
  }
}

/** 1M (or `rows`) published outbox rows, as months of a busy order service would leave them. */
const FILL_OUTBOX = `
  INSERT INTO outbox (id, event_type, schema_version, aggregate_type, aggregate_id,
         aggregate_version, payload, producer, correlation_id, occurred_at, published_at,
         attempts, next_attempt_at)
  SELECT gen_random_uuid(), 'order.created', '1.0', 'order', 'filler-' || g, 1,
         jsonb_build_object('orderId', gen_random_uuid(), 'sku', 'SKU-' || (g % ${SKUS}), 'quantity', 1),
         'order-service', 'filler', now() - interval '30 days' + g * interval '2 ms',
         now() - interval '30 days' + g * interval '2 ms' + interval '40 ms', 0,
         now() - interval '30 days' + g * interval '2 ms'
    FROM generate_series($1::int, $2::int) AS g`;

/** Inbox rows of the inventory consumer, and the reservations the same messages produced. */
const FILL_INBOX = `
  INSERT INTO processed_messages (consumer_name, message_id, processed_at)
  SELECT 'inventory', gen_random_uuid(), now() - interval '30 days' + g * interval '2 ms'
    FROM generate_series($1::int, $2::int) AS g`;
const FILL_RESERVATIONS = `
  INSERT INTO reservations (order_id, sku, quantity, status, message_id, order_version, created_at, updated_at)
  SELECT gen_random_uuid(), 'SKU-' || (g % ${SKUS}), 1, 'reserved', gen_random_uuid(), 1,
         now() - interval '30 days' + g * interval '2 ms', now() - interval '30 days' + g * interval '2 ms'
    FROM generate_series($1::int, $2::int) AS g`;

/** Times `samples` relay rounds of `batchSize` rows each (ms per round). */
async function relayRounds(db: PgDatabase, relay: OutboxRelay, o: ScaleOptions): Promise<number[]> {
  await db.transaction((tx) =>
    new OutboxStore('outbox').appendMany(
      tx,
      Array.from({ length: o.samples * o.batchSize }, (_, i) => orderCreated(i)),
    ),
  );
  await db.query('VACUUM ANALYZE outbox');
  const times: number[] = [];
  for (let i = 0; i < o.samples; i++) {
    const started = performance.now();
    const r = await relay.runOnce();
    times.push(performance.now() - started);
    if (r.published !== o.batchSize)
      throw new Error(`relay round published ${r.published} of ${o.batchSize}`);
  }
  return times;
}

/** Times `samples` sequential reserve calls of one message each (ms per call). */
async function reserveCalls(useCase: ReserveInventory, samples: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < samples; i++) {
    const e = orderCreated(i);
    const message: InboundMessage = {
      messageId: e.id,
      type: e.type,
      body: encodeEnvelope(e),
      attempt: 0,
      redelivered: false,
    };
    const started = performance.now();
    const [outcome] = await useCase.process([message]);
    times.push(performance.now() - started);
    if (outcome?.kind !== 'ack') throw new Error(`reserve: ${JSON.stringify(outcome)}`);
  }
  return times;
}

const stats = (times: number[]) => {
  const sorted = [...times].sort((a, b) => a - b);
  return {
    median: round2(median(sorted)),
    p99: round2(quantile(sorted, 0.99)),
    samples: sorted.length,
  };
};

/**
 * Cost at scale: a relay round with `rows` already-published rows in `outbox` against an empty
 * table, and a reserve call with `rows` rows in the inbox (and as many reservations) against an
 * empty inbox. Each "empty" state is the raw baseline of the "full" one, in the same database.
 */
export async function benchScale(env: Env, o: ScaleOptions): Promise<Record<string, BenchFigure>> {
  return withBenchEnvironment(env, 'scale', async ({ dbUrl, amqpUrl }) => {
    const db = new PgDatabase({ connectionString: dbUrl, max: 2, applicationName: 'bench-scale' });
    const connection = new RabbitConnection({ url: amqpUrl, connectionName: 'bench-scale' });
    try {
      await connection.withChannel((ch) => declareTopology(ch), 10_000);
      const relay = new OutboxRelay(
        {
          db,
          publisher: new RabbitPublisher(
            { connection },
            { exchange: RABBITMQ_NAMES.ordersExchange, window: 1000 },
          ),
        },
        { table: 'outbox', batchSize: o.batchSize, maxAttempts: 10 },
      );
      const purge = () =>
        connection.withChannel(async (ch) => {
          await ch.purgeQueue(RABBITMQ_NAMES.inventoryQueue);
          await ch.purgeQueue(RABBITMQ_NAMES.auditQueue);
        });
      for (let i = 0; i < SKUS; i++) await setStock(db, `SKU-${i}`, 1_000_000_000);
      const useCase = new ReserveInventory({ db }, { budget: TEST_RETRY_BUDGET });

      const calls = o.samples * 10;
      const emptyState = async (label: string) => {
        progress(`  ${label}: ${o.samples} relay rounds of ${o.batchSize}, ${calls} reserve calls`);
        await db.query('TRUNCATE outbox, processed_messages, reservations');
        await db.query('VACUUM ANALYZE outbox, processed_messages, reservations');
        const relayTimes = await relayRounds(db, relay, o);
        await purge();
        const reserveTimes = await reserveCalls(useCase, calls);
        progress(
          `    relay round median ${stats(relayTimes).median} ms, reserve call median ${stats(reserveTimes).median} ms`,
        );
        return { relayTimes, reserveTimes };
      };
      // warm-up (connections, plans, JIT), not measured
      await relayRounds(db, relay, { ...o, samples: 3 });
      await purge();
      await reserveCalls(useCase, 50);
      const before = await emptyState('empty tables');

      progress(`  filling ${o.rows.toLocaleString('en')} rows (INSERT … SELECT generate_series)`);
      await db.query('TRUNCATE outbox, processed_messages, reservations');
      await fill(db, 'outbox (published)', o.rows, FILL_OUTBOX);
      await fill(db, 'processed_messages', o.rows, FILL_INBOX);
      await fill(db, 'reservations', o.rows, FILL_RESERVATIONS);
      await db.query('VACUUM ANALYZE outbox, processed_messages, reservations');
      progress(`  full tables: ${o.samples} relay rounds, ${calls} reserve calls`);
      const relayFull = await relayRounds(db, relay, o);
      await purge();
      const reserveFull = await reserveCalls(useCase, calls);
      progress(
        `    relay round median ${stats(relayFull).median} ms, reserve call median ${stats(reserveFull).median} ms`,
      );
      // empty again, so that drift over the run (other work on the machine) hits both sides
      const after = await emptyState('empty tables again');
      const relayEmpty = [...before.relayTimes, ...after.relayTimes];
      const reserveEmpty = [...before.reserveTimes, ...after.reserveTimes];

      const re = stats(relayEmpty);
      const rf = stats(relayFull);
      const se = stats(reserveEmpty);
      const sf = stats(reserveFull);
      return {
        'scale.relay': figure(rf.median, 'ms', re.median, {
          better: 'lower',
          goal: { on: 'ratio', max: 1.2 },
          what: `relay round (claim ${o.batchSize}, publish to RabbitMQ, confirm, mark) with ${o.rows} published rows in outbox, median`,
          baselineName: 'the same round with no published rows in outbox',
          rows: o.rows,
          batchSize: o.batchSize,
          full: rf,
          empty: re,
        }),
        'scale.reserve': figure(sf.median, 'ms', se.median, {
          better: 'lower',
          goal: { on: 'ratio', max: 1.2 },
          what: `one reserve call (one message, one transaction) with ${o.rows} inbox rows and as many reservations, median`,
          baselineName: 'the same call with an empty inbox and no reservations',
          rows: o.rows,
          full: sf,
          empty: se,
        }),
      };
    } finally {
      await connection.close();
      await db.close();
    }
  });
}
