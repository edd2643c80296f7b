import type { ScratchEnvironment } from '../devkit/scratch.js';
import { TEST_RETRY_BUDGET } from '../shared/config/budget.js';
import type { Env } from '../shared/config/env.js';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { type Envelope, encodeEnvelope } from '../shared/envelope/envelope.js';
import { ReserveInventory } from '../shared/inventory/ReserveInventory.js';
import { setStock } from '../shared/inventory/stock.js';
import { OutboxRelay } from '../shared/outbox/OutboxRelay.js';
import { OutboxStore } from '../shared/outbox/OutboxStore.js';
import type { InboundMessage } from '../shared/port/types.js';
import {
  BENCH_BACKEND,
  orderEvents,
  orderQueuesPurger,
  withBenchEnvironment,
} from './environment.js';
import { quantile, round2 } from './load.js';
import { benchPinnedHorizon } from './pinnedHorizon.js';
import { progress } from './progress.js';
import { type BenchFigure, figure, median } from './report.js';

/**
 * The phases of the suite: `rows` (a relay round and a reserve call with `rows` rows already
 * there), `pinned-xmin` (the relay's throughput with and without a session pinning the vacuum
 * horizon, bench/pinnedHorizon.ts).
 */
export const SCALE_PHASES = ['rows', 'pinned-xmin'] as const;
export type ScalePhase = (typeof SCALE_PHASES)[number];

export interface ScaleOptions {
  /** Rows already in `outbox` (published) and in the inbox for the "full" measurement. */
  rows: number;
  /** Relay rounds, and reserve calls, measured in each state. */
  samples: number;
  batchSize: number;
  /** Phases to run (default: `rows`). */
  phases?: readonly ScalePhase[];
  /** pinned-xmin: seconds of flow in each compared window, in 5-s slices. */
  pinSeconds?: number;
  /** pinned-xmin: relay loops (RELAY_CONCURRENCY). */
  concurrency?: number;
  /** pinned-xmin: when to measure the unbounded claim too (default `auto`: a loss of 20 % or more). */
  pinAlternative?: 'auto' | 'always' | 'never';
}

const SKUS = 100;

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

/** One side of the comparison: its own database and virtual host, a relay and the use case. */
interface Side {
  db: PgDatabase;
  relay: OutboxRelay;
  useCase: ReserveInventory;
  purge: () => Promise<void>;
  close: () => Promise<void>;
}

async function openSide(scratch: ScratchEnvironment, batchSize: number): Promise<Side> {
  const db = scratch.database.db;
  const backend = scratch.backend('rabbitmq', BENCH_BACKEND, {
    connectionName: 'bench-scale',
    publish: { window: 1000 },
  });
  await backend.prepare('publish');
  for (let i = 0; i < SKUS; i++) await setStock(db, `SKU-${i}`, 1_000_000_000);
  return {
    db,
    relay: new OutboxRelay(
      { db, publisher: backend.publisher('outbox') },
      { table: 'outbox', batchSize, maxAttempts: 10 },
    ),
    useCase: new ReserveInventory({ db }, { budget: TEST_RETRY_BUDGET }),
    purge: await orderQueuesPurger(scratch),
    // the pool and the backend are the scratch environment's: closed with it
    close: () => backend.close(),
  };
}

/** Due rows for `rounds` relay rounds. */
async function addDueRows(side: Side, rows: number): Promise<void> {
  await side.db.transaction((tx) =>
    new OutboxStore('outbox').appendMany(tx, orderEvents(rows, SKUS)),
  );
  await side.db.query('VACUUM ANALYZE outbox');
}

async function timedRound(side: Side, batchSize: number): Promise<number> {
  const started = performance.now();
  const r = await side.relay.runOnce();
  const ms = performance.now() - started;
  if (r.published !== batchSize)
    throw new Error(`relay round published ${r.published} of ${batchSize}`);
  return ms;
}

async function timedReserve(side: Side, i: number): Promise<number> {
  const [e] = orderEvents(1, SKUS, i) as [Envelope];
  const message: InboundMessage = {
    messageId: e.id,
    type: e.type,
    body: encodeEnvelope(e),
    attempt: 0,
    redelivered: false,
  };
  const started = performance.now();
  const [outcome] = await side.useCase.process([message]);
  const ms = performance.now() - started;
  if (outcome?.kind !== 'ack') throw new Error(`reserve: ${JSON.stringify(outcome)}`);
  return ms;
}

/** Runs `n` measurements alternating between the sides (ABBA…), so drift hits both alike. */
async function interleaved(
  n: number,
  measure: (side: 'empty' | 'full', i: number) => Promise<number>,
): Promise<{ empty: number[]; full: number[] }> {
  const out = { empty: [] as number[], full: [] as number[] };
  for (let i = 0; i < n; i++) {
    const order: ('empty' | 'full')[] = i % 2 ? ['full', 'empty'] : ['empty', 'full'];
    for (const side of order) out[side].push(await measure(side, i));
  }
  return out;
}

const stats = (times: number[]) => {
  const sorted = [...times].sort((a, b) => a - b);
  return {
    median: round2(median(sorted)),
    p99: round2(quantile(sorted, 0.99)),
    samples: sorted.length,
  };
};

/** The suite: its phases in order (see `SCALE_PHASES`). */
export async function benchScale(env: Env, o: ScaleOptions): Promise<Record<string, BenchFigure>> {
  const phases = o.phases ?? ['rows'];
  const figures: Record<string, BenchFigure> = {};
  if (phases.includes('rows')) Object.assign(figures, await benchScaleRows(env, o));
  if (phases.includes('pinned-xmin')) {
    Object.assign(
      figures,
      await benchPinnedHorizon(env, {
        seconds: o.pinSeconds ?? 30,
        batchSize: o.batchSize,
        concurrency: o.concurrency ?? 2,
        alternative: o.pinAlternative ?? 'auto',
      }),
    );
  }
  return figures;
}

/**
 * Cost at scale: a relay round with `rows` already-published rows in `outbox` against an empty
 * table, and a reserve call with `rows` rows in the inbox (and as many reservations) against an
 * empty inbox. The two states live in two databases of the same server, measured alternately in
 * the same run: the empty one is the raw baseline of the full one.
 */
async function benchScaleRows(env: Env, o: ScaleOptions): Promise<Record<string, BenchFigure>> {
  const pool = { poolSize: 2 };
  return withBenchEnvironment(
    env,
    'scale_empty',
    (emptyEnv) =>
      withBenchEnvironment(
        env,
        'scale_full',
        async (fullEnv) => {
          const sides = {
            empty: await openSide(emptyEnv, o.batchSize),
            full: await openSide(fullEnv, o.batchSize),
          };
          try {
            const full = sides.full.db;
            progress(
              `  filling ${o.rows.toLocaleString('en')} rows (INSERT … SELECT generate_series)`,
            );
            await fill(full, 'outbox (published)', o.rows, FILL_OUTBOX);
            await fill(full, 'processed_messages', o.rows, FILL_INBOX);
            await fill(full, 'reservations', o.rows, FILL_RESERVATIONS);
            await full.query('VACUUM ANALYZE outbox, processed_messages, reservations');
            const calls = o.samples * 10;
            progress(
              `  ${o.samples} relay rounds of ${o.batchSize} and ${calls} reserve calls on each side, alternating`,
            );
            // warm-up on both sides (connections, plans, JIT), not measured
            for (const side of Object.values(sides)) {
              await addDueRows(side, 2 * o.batchSize);
              for (let i = 0; i < 2; i++) await timedRound(side, o.batchSize);
              for (let i = 0; i < 20; i++) await timedReserve(side, i);
            }
            for (const side of Object.values(sides))
              await addDueRows(side, o.samples * o.batchSize);
            const relay = await interleaved(o.samples, (side) =>
              timedRound(sides[side], o.batchSize),
            );
            for (const side of Object.values(sides)) await side.purge();
            const reserve = await interleaved(calls, (side, i) => timedReserve(sides[side], i));
            const re = stats(relay.empty);
            const rf = stats(relay.full);
            const se = stats(reserve.empty);
            const sf = stats(reserve.full);
            progress(
              `    relay round median: empty ${re.median} ms, full ${rf.median} ms; reserve call median: empty ${se.median} ms, full ${sf.median} ms`,
            );
            return {
              'scale.relay': figure(rf.median, 'ms', re.median, {
                better: 'lower',
                goal: { on: 'ratio', max: 1.2 },
                what: `relay round (claim ${o.batchSize}, publish to RabbitMQ, confirm, mark) with ${o.rows} published rows in outbox, median`,
                baselineName:
                  'the same round on an empty outbox (another database, rounds alternated)',
                rows: o.rows,
                batchSize: o.batchSize,
                full: rf,
                empty: re,
              }),
              'scale.reserve': figure(sf.median, 'ms', se.median, {
                better: 'lower',
                goal: { on: 'ratio', max: 1.2 },
                what: `one reserve call (one message, one transaction) with ${o.rows} inbox rows and as many reservations, median`,
                baselineName:
                  'the same call on an empty inbox (another database, calls alternated)',
                rows: o.rows,
                full: sf,
                empty: se,
              }),
            };
          } finally {
            for (const side of Object.values(sides)) await side.close();
          }
        },
        pool,
      ),
    pool,
  );
}
