import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { ScratchEnvironment } from '../devkit/scratch.js';
import type { Env } from '../shared/config/env.js';
import type { SqlDatabase } from '../shared/db/types.js';
import { CURRENT_SCHEMA_VERSION, type Envelope } from '../shared/envelope/envelope.js';
import {
  DEFAULT_CLAIM_MARGIN_MS,
  DEFAULT_FULL_CLAIM_EVERY_MS,
  OutboxRelay,
} from '../shared/outbox/OutboxRelay.js';
import { OutboxStore } from '../shared/outbox/OutboxStore.js';
import { RABBITMQ_NAMES } from '../shared/pipeline/names.js';
import { sleep } from '../shared/util/async.js';
import { BENCH_BACKEND, withBenchEnvironment } from './environment.js';
import { round2 } from './load.js';
import { progress } from './progress.js';
import { type BenchFigure, figure } from './report.js';

/**
 * The `pinned-xmin` phase of the `scale` suite: the relay's throughput while a session pins the
 * database's vacuum horizon, against the same flow without the pin in another database of the
 * same server (`benchPinnedHorizon`). See docs/performance.md, "Pinned horizon (idle in transaction)".
 */
export interface PinnedHorizonOptions {
  /** Seconds of flow in each compared window, in 5-s slices. */
  seconds: number;
  batchSize: number;
  /** Relay loops per database (RELAY_CONCURRENCY). */
  concurrency: number;
  /** When to measure the unbounded claim too: `auto` (a loss of `MAX_LOSS` or more), `always`, `never`. */
  alternative?: 'auto' | 'always' | 'never';
}

/** Outbox rows per writer transaction (OutboxStore.appendMany). */
const WRITE_BATCH = 500;
/** Writer loops per database: enough that the relay, not the writers, sets the pace. */
const WRITERS = 2;
/** The two databases' flows alternate in slices this long (Aurora's default autovacuum naptime). */
const SLICE_MS = 5_000;
/** The goal: the relay loses less than this fraction of its throughput while the horizon is pinned. */
const MAX_LOSS = 0.2;
const STORE = new OutboxStore('outbox');

/**
 * The fault: a session takes a snapshot and sits idle in its transaction. It takes no xid (no
 * `txid_current()`): its own database's horizon is pinned at the snapshot's xmin all the same, but
 * an xid would also hold back the vacuum of the server's other busy databases (measured, see
 * docs/performance.md), database A of this phase among them.
 */
const PIN_STATEMENTS = [
  'BEGIN ISOLATION LEVEL REPEATABLE READ',
  'SELECT 1 FROM outbox LIMIT 1',
] as const;

/** One database with its virtual host (`openSide`). */
type Side = Awaited<ReturnType<typeof openSide>>;

interface Run {
  o: PinnedHorizonOptions;
  /** Rows the writers keep waiting for the relay. */
  cap: number;
  /** The server's autovacuum is off: a plain `VACUUM outbox` per database per slice instead. */
  vacuumEachSlice: boolean;
}

/**
 * The relay's claim: `production`, bounded as deployed (`OutboxRelay`'s defaults); `unbounded`,
 * `fullClaimEveryMs: 0` (every claim reads the partial index from its oldest entry).
 */
type Claim = 'production' | 'unbounded';

/**
 * One side's window: its relays, the unpublished rows (the writers' cap, carried from slice to
 * slice), and what the relays published, in all and per second slice by slice.
 */
type Window = ReturnType<typeof newWindow>;
type WindowResult = Awaited<ReturnType<typeof result>>;

/**
 * `WRITE_BATCH` `order.created` rows as the order service writes them, built as literals:
 * `newEnvelope` validates each with zod, which at thousands of rows/s would take the relay's thread.
 */
async function appendBatch(db: SqlDatabase): Promise<number> {
  const rows = Array.from({ length: WRITE_BATCH }, (_, i): Envelope => {
    const orderId = randomUUID();
    return {
      id: randomUUID(),
      type: 'order.created',
      schema_version: CURRENT_SCHEMA_VERSION,
      occurred_at: new Date().toISOString(),
      producer: 'order-service',
      correlation_id: orderId,
      causation_id: null,
      aggregate: { type: 'order', id: orderId, version: 1 },
      data: { orderId, sku: `SKU-${i % 100}`, quantity: 1 },
    };
  });
  await db.transaction((tx) => STORE.appendMany(tx, rows));
  return rows.length;
}

function newWindow(run: Run, side: Side, claim: Claim) {
  const options = { table: 'outbox', batchSize: run.o.batchSize, maxAttempts: 10 } as const;
  const relays = Array.from(
    { length: run.o.concurrency },
    () =>
      new OutboxRelay(
        { db: side.db, publisher: side.publisher },
        claim === 'unbounded' ? { ...options, fullClaimEveryMs: 0 } : options,
      ),
  );
  return { relays, backlog: run.cap, published: 0, ms: 0, sliceRates: [] as number[], errors: 0 };
}

/** Runs the side's relay loops and writers for `ms` (and its VACUUM, the server's being off). */
async function runSlice(run: Run, side: Side, w: Window, ms: number): Promise<void> {
  await side.purge();
  const endAt = performance.now() + ms;
  const s = { stopped: false, published: 0 };
  const loop = async (step: () => Promise<void>) => {
    while (!s.stopped) {
      await step().catch(async () => {
        w.errors++;
        await sleep(50);
      });
    }
  };
  const relayRound = (relay: OutboxRelay) => async () => {
    const r = await relay.runOnce();
    w.backlog -= r.published;
    if (performance.now() <= endAt) s.published += r.published;
    if (r.claimed === 0) await sleep(5);
  };
  const write = async () => {
    if (w.backlog >= run.cap) await sleep(2);
    else w.backlog += await appendBatch(side.db);
  };
  const loops = [
    ...w.relays.map((relay) => loop(relayRound(relay))),
    ...Array.from({ length: WRITERS }, () => loop(write)),
    ...(run.vacuumEachSlice ? [side.db.query('VACUUM outbox')] : []),
  ];
  await sleep(ms);
  s.stopped = true;
  await Promise.all(loops);
  w.ms += ms;
  w.published += s.published;
  w.sliceRates.push(Math.round(s.published / (ms / 1000)));
}

/** Empty outbox, the writers' backlog in place, VACUUM (ANALYZE): how every window starts. */
async function reset(side: Side, cap: number): Promise<void> {
  await side.db.query('TRUNCATE outbox');
  for (let n = 0; n < cap; ) n += await appendBatch(side.db);
  await side.db.query('VACUUM (ANALYZE) outbox');
}

/** The fault: a session of its own on the database, idle in a transaction holding a snapshot. */
async function pinHorizon(url: string): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: url, application_name: 'bench-pin' });
  client.on('error', () => {});
  await client.connect();
  for (const statement of PIN_STATEMENTS) await client.query(statement);
  return async () => {
    await client.query('ROLLBACK').catch(() => {});
    await client.end().catch(() => {});
  };
}

/** The window's figures; `outboxDeadTuples` at its end: in B, the versions the pin kept. */
async function result(side: Side, w: Window, label: string) {
  const { rows } = await side.db.query<{ n: string }>(
    `SELECT n_dead_tup AS n FROM pg_stat_user_tables WHERE relname = 'outbox'`,
  );
  const r = {
    relayPerSecond: Math.round(w.published / (w.ms / 1000)),
    sliceRates: w.sliceRates,
    outboxDeadTuples: Number(rows[0]?.n ?? 0),
    errors: w.errors,
  };
  progress(
    `    ${side.name}, ${label}: ${r.relayPerSecond} rows/s (by slice ${r.sliceRates.join(' ')}); outbox ${r.outboxDeadTuples} dead tuples${r.errors ? `; ${r.errors} errors` : ''}`,
  );
  return r;
}

/** A's window without the pin and B's with it, their slices alternated (ABBA…). */
async function pair(
  run: Run,
  sides: readonly [Side, Side],
  claim: Claim,
  slices: number,
): Promise<[WindowResult, WindowResult]> {
  for (const side of sides) await reset(side, run.cap);
  const windows = [newWindow(run, sides[0], claim), newWindow(run, sides[1], claim)] as const;
  const release = await pinHorizon(sides[1].url);
  try {
    for (let i = 0; i < slices; i++) {
      for (const k of i % 2 ? [1, 0] : [0, 1])
        await runSlice(run, sides[k] as Side, windows[k] as Window, SLICE_MS);
    }
    return [
      await result(sides[0], windows[0], `${claim} claim, no pin`),
      await result(sides[1], windows[1], `${claim} claim, pinned`),
    ];
  } finally {
    await release();
  }
}

/** The mean of the last third of the slices' rates (the pin's effect grows with its age). */
export function lastThird(rates: readonly number[]): number {
  const tail = rates.slice(-Math.max(1, Math.ceil(rates.length / 3)));
  return tail.length ? Math.round(tail.reduce((a, b) => a + b, 0) / tail.length) : Number.NaN;
}

/** 1 − with / without, in percent (two decimals); positive = throughput lost. */
export function lossPercent(without: number, withPin: number): number {
  return without > 0 ? round2((1 - withPin / without) * 100) : Number.NaN;
}

async function openSide(scratch: ScratchEnvironment, name: string) {
  const backend = scratch.backend('rabbitmq', BENCH_BACKEND, {
    connectionName: `bench-pinned-${name}`,
    publish: { window: 1000 },
  });
  await backend.prepare('publish');
  return {
    name,
    url: scratch.database.url,
    db: scratch.database.db,
    publisher: backend.publisher('outbox'),
    purge: () =>
      backend.withChannel(async (ch) => {
        await ch.purgeQueue(RABBITMQ_NAMES.inventoryQueue);
        await ch.purgeQueue(RABBITMQ_NAMES.auditQueue);
      }),
  };
}

/**
 * The phase. Two databases of the same server, A and B (each with its virtual host), each with
 * relay loops as deployed and writers keeping rows waiting, run alternately in 5-s slices (ABBA…)
 * so that the machine's drift hits both alike; B's horizon is pinned for its whole window, A's is
 * not. When the relay loses `MAX_LOSS` or more (or when asked), the same pair with the claim unbounded.
 */
export async function benchPinnedHorizon(
  env: Env,
  o: PinnedHorizonOptions,
): Promise<Record<string, BenchFigure>> {
  const pool = { poolSize: o.concurrency + WRITERS + 1 };
  return withBenchEnvironment(
    env,
    'pinned_a',
    (a) =>
      withBenchEnvironment(
        env,
        'pinned_b',
        async (b) => phase(o, [await openSide(a, 'A'), await openSide(b, 'B')]),
        pool,
      ),
    pool,
  );
}

async function phase(o: PinnedHorizonOptions, sides: [Side, Side]) {
  const started = performance.now();
  const { rows } = await sides[0].db.query<{ autovacuum: string }>('SHOW autovacuum');
  const vacuumEachSlice = rows[0]?.autovacuum !== 'on';
  const run: Run = { o, cap: 8 * o.batchSize * o.concurrency, vacuumEachSlice };
  const slices = Math.max(1, Math.round((o.seconds * 1000) / SLICE_MS));
  const vacuum = vacuumEachSlice
    ? "the server's autovacuum off: VACUUM outbox per database per slice"
    : "the server's autovacuum";
  progress(
    `  pinned horizon: databases A (no pin) and B (pinned), each ${o.concurrency} relay loops (batches of ${o.batchSize}) and ${WRITERS} writers; ${slices} slices of ${SLICE_MS / 1000} s each, alternated; ${vacuum}`,
  );
  // warm-up (connections, plans, JIT), not measured
  for (const side of sides) {
    await reset(side, run.cap);
    await runSlice(run, side, newWindow(run, side, 'production'), 3_000);
  }
  const bounded = await pair(run, sides, 'production', slices);
  const loss = lossPercent(bounded[0].relayPerSecond, bounded[1].relayPerSecond);
  const missed = !(loss < MAX_LOSS * 100);
  const mode = o.alternative ?? 'auto';
  const unbounded =
    mode === 'always' || (mode === 'auto' && missed)
      ? await pair(run, sides, 'unbounded', slices)
      : undefined;
  const pinnedFigure = ([a, b]: readonly [WindowResult, WindowResult], extra: object) =>
    figure(b.relayPerSecond, 'rows/s', a.relayPerSecond, {
      goal: { on: 'ratio', min: 1 - MAX_LOSS },
      lossPercent: lossPercent(a.relayPerSecond, b.relayPerSecond),
      lossLastThirdPercent: lossPercent(lastThird(a.sliceRates), lastThird(b.sliceRates)),
      ...extra,
      baselineName: 'the same flow in another database without the pin, slices alternated',
      seconds: (slices * SLICE_MS) / 1000,
      sliceSeconds: SLICE_MS / 1000,
      batchSize: o.batchSize,
      concurrency: o.concurrency,
      pin: PIN_STATEMENTS.join('; '),
      vacuum,
      phaseSeconds: Math.round((performance.now() - started) / 1000),
      windows: { without: a, withPin: b },
    });
  const summary = (f: BenchFigure) =>
    `${f.baseline} → ${f.value} rows/s with the pin (loss ${f.lossPercent} %, last third ${f.lossLastThirdPercent} %)`;
  const figures: Record<string, BenchFigure> = {
    'scale.pinned.relay': pinnedFigure(bounded, {
      what: `relay rows published per second (${o.concurrency} loops, claim ${o.batchSize} bounded at the oldest row last claimed − ${DEFAULT_CLAIM_MARGIN_MS} ms with a full claim every ${DEFAULT_FULL_CLAIM_EVERY_MS / 1000} s, publish to RabbitMQ, mark) with a session pinning the horizon for ${(slices * SLICE_MS) / 1000} s of flow`,
    }),
  };
  progress(
    `  pinned horizon, bounded claim: ${summary(figures['scale.pinned.relay'] as BenchFigure)}; goal < ${MAX_LOSS * 100} %: ${missed ? 'MISSED' : 'met'}`,
  );
  if (unbounded) {
    const versus = round2(bounded[1].relayPerSecond / Math.max(1, unbounded[1].relayPerSecond));
    const f = pinnedFigure(unbounded, {
      what: 'as scale.pinned.relay with the claim unbounded (OutboxRelay with fullClaimEveryMs 0: every claim reads the partial index from its oldest entry)',
      productionVersusThisWithPin: versus,
    });
    figures['scale.pinned.relay.unbounded'] = f;
    progress(
      `  unbounded claim: ${summary(f)}; pinned, the bounded claim publishes ${versus}× its rows/s`,
    );
  }
  return figures;
}
