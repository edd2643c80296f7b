import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { Worker } from 'node:worker_threads';
import pg from 'pg';
import type { ScratchEnvironment } from '../devkit/scratch.js';
import type { Env } from '../shared/config/env.js';
import type { TransactionOptions } from '../shared/db/transactionBounds.js';
import type { QueryResult, Row, SqlDatabase, SqlExecutor, SqlParam } from '../shared/db/types.js';
import { CURRENT_SCHEMA_VERSION, type Envelope } from '../shared/envelope/envelope.js';
import { setStock } from '../shared/inventory/stock.js';
import {
  type ClaimCounts,
  DEFAULT_CLAIM_MARGIN_MS,
  DEFAULT_FULL_CLAIM_EVERY_MS,
  OutboxRelay,
} from '../shared/outbox/OutboxRelay.js';
import { OutboxStore } from '../shared/outbox/OutboxStore.js';
import type { Publisher } from '../shared/port/types.js';
import { RABBITMQ_NAMES } from '../shared/transport/rabbitmq/constants.js';
import { sleep } from '../shared/util/async.js';
import { BENCH_BACKEND, withBenchEnvironment } from './environment.js';
import { quantile, round2 } from './load.js';
import type {
  ReserveCommand,
  ReserveReply,
  ReserveRun,
  ReserveWorkerData,
} from './pinnedReserveWorker.js';
import { progress } from './progress.js';
import { type BenchFigure, figure, median } from './report.js';

/**
 * The `pinned-xmin` phase of the `scale` suite: a steady flow through our relay and our reserve
 * path (a writer keeping the relay busy), measured without, and with, a session pinning the
 * database's vacuum horizon (idle in a REPEATABLE READ transaction, its snapshot taken), then after
 * the pin is released; the two run in two databases, alternated slice by slice (`benchPinnedHorizon`).
 * See docs/performance.md, "Pinned horizon (idle in transaction)".
 */
export interface PinnedHorizonOptions {
  /** Seconds of each compared window, in 5-s slices (the window after the release: a third). */
  seconds: number;
  /** Relay rows per round. */
  batchSize: number;
  /** Relay loops, each with its own transaction (RELAY_CONCURRENCY). */
  concurrency: number;
  /**
   * When to measure the claim before the bound (`Claim` `unbounded`) too: `auto` when the relay or
   * the reserve loop loses `MAX_LOSS` or more with the pin (default), `always`, `never`.
   */
  alternative?: 'auto' | 'always' | 'never';
}

const SKUS = 100;
/** Outbox rows per writer transaction (OutboxStore.appendMany). */
const WRITE_BATCH = 500;
/** Writer loops per database: enough that the relay, not the writer, sets the pace. */
const WRITERS = 2;
/**
 * Aurora PostgreSQL's default `autovacuum_naptime` (RDS for PostgreSQL: 15 s, PostgreSQL: 60 s):
 * how often the emulated autovacuum visits the database when the server's own is off.
 */
const NAPTIME_MS = 5_000;
/** The two databases' flows alternate in slices this long: one autovacuum visit each. */
const SLICE_MS = NAPTIME_MS;
/** The goal: the flow loses less than this fraction of its throughput while the horizon is pinned. */
const MAX_LOSS = 0.2;
const TABLES = [
  'outbox',
  'processed_messages',
  'reservations',
  'stock',
  'inventory_outbox',
] as const;
type Table = (typeof TABLES)[number];

/**
 * The fault (the PostgreSQL-queue benchmarks' `idle_in_tx`): a session takes a snapshot and sits
 * idle in its transaction. It takes no xid (no `txid_current()`): its own database's horizon is
 * pinned at the snapshot's xmin all the same, but an xid would also enter every snapshot taken in
 * the server's other databases and hold back theirs whenever they are busy (measured, see
 * docs/performance.md): the unpinned database A of this phase, and the databases of whoever else
 * uses the server.
 */
const PIN_STATEMENTS = [
  'BEGIN ISOLATION LEVEL REPEATABLE READ',
  'SELECT 1 FROM outbox LIMIT 1',
] as const;

/**
 * An `order.created` envelope as the order service writes it, built as a literal: `newEnvelope`
 * validates each one with zod, which at thousands of rows per second would take the relay's thread.
 */
function orderCreated(i: number): Envelope {
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
    data: { orderId, sku: `SKU-${i % SKUS}`, quantity: 1 },
  };
}

// ---------------------------------------------------------------------------------------------
// The relay's statements, timed

type StatementKind = 'hasClaimable' | 'claim' | 'mark';

/** Which of the relay's statements `sql` is (OutboxStore.hasClaimable / claimBatch / markPublished). */
export function statementKind(sql: string): StatementKind | undefined {
  if (sql.includes('FOR UPDATE SKIP LOCKED')) return 'claim';
  if (sql.startsWith('SELECT EXISTS') && sql.includes('published_at IS NULL'))
    return 'hasClaimable';
  if (sql.includes('SET published_at = statement_timestamp()')) return 'mark';
  return undefined;
}

interface Timings {
  hasClaimable: number[];
  claim: number[];
  mark: number[];
}

interface SeenStatement {
  sql: string;
  params: readonly SqlParam[];
}

/**
 * The relay's statements as seen, for the probes at the end of a window: the full (unbounded)
 * ones as first seen, the bounded ones as last seen (their bound the relay's latest).
 */
interface Seen {
  hasClaimable?: SeenStatement;
  claim?: SeenStatement;
  boundedHasClaimable?: SeenStatement;
  boundedClaim?: SeenStatement;
}

/** Whether a claim statement (or probe) carries the relay's bound on `occurred_at`. */
const isBounded = (sql: string) => sql.includes('AND occurred_at >= $');

/** The scratch pool, with the relay's three statements timed and the claim statements recorded. */
class RelayDb implements SqlDatabase {
  constructor(
    private readonly inner: SqlDatabase,
    private readonly timings: Timings,
    private readonly seen: Seen,
  ) {}

  query<T extends object = Row>(
    sql: string,
    params?: readonly SqlParam[],
  ): Promise<QueryResult<T>> {
    return this.run<T>(this.inner, sql, params);
  }

  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>, options?: TransactionOptions): Promise<T> {
    return this.inner.transaction(
      (tx) =>
        fn({
          query: <U extends object = Row>(sql: string, params?: readonly SqlParam[]) =>
            this.run<U>(tx, sql, params),
        }),
      options,
    );
  }

  /** The pool is the scratch environment's: closed with it. */
  async close(): Promise<void> {}

  private async run<T extends object>(
    ex: SqlExecutor,
    sql: string,
    params: readonly SqlParam[] | undefined,
  ): Promise<QueryResult<T>> {
    const kind = statementKind(sql);
    if (!kind) return ex.query<T>(sql, params);
    const seen = { sql, params: params ?? [] };
    if (kind === 'hasClaimable') {
      if (isBounded(sql)) this.seen.boundedHasClaimable = seen;
      else this.seen.hasClaimable ??= seen;
    }
    if (kind === 'claim') {
      if (isBounded(sql)) this.seen.boundedClaim = seen;
      else this.seen.claim ??= seen;
    }
    const started = performance.now();
    const result = await ex.query<T>(sql, params);
    this.timings[kind].push(performance.now() - started);
    return result;
  }
}

// ---------------------------------------------------------------------------------------------
// Autovacuum as deployed

export interface AutovacuumRule {
  vacThreshold: number;
  vacScale: number;
  insThreshold: number;
  insScale: number;
  anlThreshold: number;
  anlScale: number;
  costDelayMs: number;
  costLimit: number;
}

interface TableActivity {
  deadTuples: number;
  insertedSinceVacuum: number;
  modifiedSinceAnalyze: number;
  reltuples: number;
}

/** PostgreSQL's rule (autovacuum.c, relation_needs_vacanalyze) for one table. */
export function autovacuumNeeds(
  rule: AutovacuumRule,
  t: TableActivity,
): { vacuum: boolean; analyze: boolean } {
  const tuples = Math.max(0, t.reltuples);
  const vacuum =
    t.deadTuples > rule.vacThreshold + rule.vacScale * tuples ||
    (rule.insThreshold >= 0 && t.insertedSinceVacuum > rule.insThreshold + rule.insScale * tuples);
  const analyze = t.modifiedSinceAnalyze > rule.anlThreshold + rule.anlScale * tuples;
  return { vacuum, analyze };
}

async function readAutovacuum(
  client: pg.Client,
): Promise<{ serverOn: boolean; rule: AutovacuumRule }> {
  const { rows } = await client.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings
      WHERE name IN ('autovacuum', 'autovacuum_vacuum_threshold', 'autovacuum_vacuum_scale_factor',
        'autovacuum_vacuum_insert_threshold', 'autovacuum_vacuum_insert_scale_factor',
        'autovacuum_analyze_threshold', 'autovacuum_analyze_scale_factor',
        'autovacuum_vacuum_cost_delay', 'autovacuum_vacuum_cost_limit', 'vacuum_cost_limit')`,
  );
  const s = Object.fromEntries(rows.map((r) => [r.name, r.setting]));
  const n = (name: string) => Number(s[name]);
  const limit = n('autovacuum_vacuum_cost_limit');
  return {
    serverOn: s.autovacuum === 'on',
    rule: {
      vacThreshold: n('autovacuum_vacuum_threshold'),
      vacScale: n('autovacuum_vacuum_scale_factor'),
      insThreshold: n('autovacuum_vacuum_insert_threshold'),
      insScale: n('autovacuum_vacuum_insert_scale_factor'),
      anlThreshold: n('autovacuum_analyze_threshold'),
      anlScale: n('autovacuum_analyze_scale_factor'),
      costDelayMs: n('autovacuum_vacuum_cost_delay'),
      costLimit: limit > 0 ? limit : n('vacuum_cost_limit'),
    },
  };
}

// ---------------------------------------------------------------------------------------------
// One side: a database of its own (with its virtual host), its relay loops, writer and reserve loop

/** The reserve loop's thread (bench/pinnedReserveWorker.ts). */
class ReserveWorker {
  private readonly worker: Worker;
  private readonly replies: ((r: ReserveReply) => void)[] = [];

  constructor(data: ReserveWorkerData) {
    this.worker = new Worker(new URL('./pinnedReserveWorker.ts', import.meta.url), {
      workerData: data,
    });
    this.worker.on('message', (r: ReserveReply) => this.replies.shift()?.(r));
  }

  private ask<R extends ReserveReply>(c: ReserveCommand): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      this.worker.once('error', onError);
      this.replies.push((r) => {
        this.worker.off('error', onError);
        resolve(r as R);
      });
      this.worker.postMessage(c);
    });
  }

  /** Starts the loop; calls acknowledged within [startedAt, endAt] (epoch ms) count. */
  start(startedAt: number, endAt: number): void {
    this.worker.postMessage({ type: 'run', startedAt, endAt } satisfies ReserveCommand);
  }

  stop(): Promise<ReserveRun> {
    return this.ask<ReserveRun>({ type: 'stop' });
  }

  async probe(calls: number): Promise<number[]> {
    return (await this.ask<{ type: 'probed'; callMs: number[] }>({ type: 'probe', calls })).callMs;
  }

  async close(): Promise<void> {
    await this.ask({ type: 'close' }).catch(() => {});
    await this.worker.terminate();
  }
}

interface Side {
  name: string;
  scratch: ScratchEnvironment;
  db: SqlDatabase;
  publisher: Publisher;
  purge: () => Promise<void>;
  /** Statistics, probes, TRUNCATE (its own session). */
  meter: pg.Client;
  /** The emulated autovacuum's session. */
  vacuumer: pg.Client;
  reserve: ReserveWorker;
}

/**
 * The relay's claim: `production`, bounded as the relay is (`OutboxRelay`); `unbounded`, the claim
 * before the bound (`fullClaimEveryMs: 0`: every claim reads the whole partial index).
 */
type Claim = 'production' | 'unbounded';

/** What one side measures over its slices of a window. */
interface Measure {
  label: string;
  claim: Claim;
  pinned: boolean;
  relays: OutboxRelay[];
  /** The relays' statements, seen in this window. */
  seen: Seen;
  activeMs: number;
  /** Unpublished rows (the writer's cap), carried from slice to slice. */
  backlog: number;
  published: number;
  inserted: number;
  reserves: number;
  roundMs: number[];
  /** Rounds (counted in `roundMs`) that claimed a full batch: the relay, not the writer, set the pace. */
  fullRounds: number;
  reserveMs: number[];
  /** Rows published and reserves per second, slice by slice. */
  sliceRates: { relay: number[]; reserve: number[] };
  timings: Timings;
  vacuums: Partial<Record<Table, { runs: number; ms: number }>>;
  errors: { relay: number; writer: number; reserve: number };
}

/** One slice of a side's flow: its loops run until `stopped`; what ends by `endAt` counts. */
interface Slice {
  stopped: boolean;
  endAt: number;
  m: Measure;
  published: number;
}

async function relayLoop(s: Slice, relay: OutboxRelay, batchSize: number): Promise<void> {
  while (!s.stopped) {
    const started = performance.now();
    let published = 0;
    let claimed = 0;
    try {
      const r = await relay.runOnce();
      published = r.published;
      claimed = r.claimed;
    } catch {
      s.m.errors.relay++;
      await sleep(50);
      continue;
    }
    const ended = performance.now();
    s.m.backlog -= published;
    if (ended <= s.endAt) {
      s.published += published;
      s.m.roundMs.push(ended - started);
      if (claimed === batchSize) s.m.fullRounds++;
    }
    if (claimed === 0) await sleep(5);
  }
}

async function writerLoop(s: Slice, db: SqlDatabase, cap: number): Promise<void> {
  const store = new OutboxStore('outbox');
  let i = 0;
  while (!s.stopped) {
    if (s.m.backlog >= cap) {
      await sleep(2);
      continue;
    }
    const rows = Array.from({ length: WRITE_BATCH }, () => orderCreated(i++));
    try {
      await db.transaction((tx) => store.appendMany(tx, rows));
    } catch {
      s.m.errors.writer++;
      await sleep(50);
      continue;
    }
    s.m.backlog += rows.length;
    if (performance.now() <= s.endAt) s.m.inserted += rows.length;
  }
}

/**
 * One visit of autovacuum to the side's database, as the server would make every naptime: each
 * table past PostgreSQL's thresholds (the server's settings, `relation_needs_vacanalyze`) is
 * vacuumed (and analyzed) at autovacuum's cost throttling. Used when the server's own is off.
 */
async function autovacuumVisit(s: Slice, client: pg.Client, rule: AutovacuumRule): Promise<void> {
  const { rows } = await client.query<{
    relname: Table;
    n_dead_tup: string;
    n_ins_since_vacuum: string;
    n_mod_since_analyze: string;
    reltuples: number;
  }>(
    `SELECT s.relname, s.n_dead_tup, s.n_ins_since_vacuum, s.n_mod_since_analyze, c.reltuples
       FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
      WHERE s.relname = ANY ($1::text[])`,
    [TABLES],
  );
  for (const r of rows) {
    if (s.stopped) return;
    const need = autovacuumNeeds(rule, {
      deadTuples: Number(r.n_dead_tup),
      insertedSinceVacuum: Number(r.n_ins_since_vacuum),
      modifiedSinceAnalyze: Number(r.n_mod_since_analyze),
      reltuples: Number(r.reltuples),
    });
    if (!need.vacuum && !need.analyze) continue;
    const started = performance.now();
    await client.query(
      need.vacuum
        ? `VACUUM${need.analyze ? ' (ANALYZE)' : ''} ${r.relname}`
        : `ANALYZE ${r.relname}`,
    );
    const v = s.m.vacuums[r.relname] ?? { runs: 0, ms: 0 };
    v.runs++;
    v.ms += performance.now() - started;
    s.m.vacuums[r.relname] = v;
  }
}

interface Run {
  o: PinnedHorizonOptions;
  autovacuum: { serverOn: boolean; rule: AutovacuumRule };
  /** Rows the writer keeps waiting for the relay. */
  cap: number;
}

/**
 * Runs the side's flow for `ms`: its relay loops, its writer, its reserve thread, and (the
 * server's being off) one autovacuum visit, since a slice lasts one naptime.
 */
async function runSlice(run: Run, side: Side, m: Measure, ms: number): Promise<void> {
  await side.purge();
  const startedAt = performance.now();
  const s: Slice = { stopped: false, endAt: startedAt + ms, m, published: 0 };
  const epoch = Date.now();
  side.reserve.start(epoch, epoch + ms);
  const loops = [
    ...m.relays.map((r) => relayLoop(s, r, run.o.batchSize)),
    ...Array.from({ length: WRITERS }, () => writerLoop(s, side.db, run.cap)),
    ...(run.autovacuum.serverOn ? [] : [autovacuumVisit(s, side.vacuumer, run.autovacuum.rule)]),
  ];
  await sleep(ms);
  s.stopped = true;
  const [reserve] = await Promise.all([side.reserve.stop(), ...loops]);
  m.activeMs += ms;
  m.published += s.published;
  m.reserves += reserve.reserves;
  m.reserveMs.push(...reserve.callMs);
  m.errors.reserve += reserve.errors;
  m.sliceRates.relay.push(Math.round(s.published / (ms / 1000)));
  m.sliceRates.reserve.push(Math.round(reserve.reserves / (ms / 1000)));
}

// ---------------------------------------------------------------------------------------------
// Measurements at the end of a window

interface TableFigures {
  deadTuples: number;
  liveTuples: number;
  heapBytes: number;
  indexBytes: number;
  vacuums: number;
}

async function tableFigures(client: pg.Client): Promise<{
  tables: Record<Table, TableFigures>;
  unpublishedIndexBytes: number;
}> {
  const { rows } = await client.query<{
    relname: Table;
    n_dead_tup: string;
    n_live_tup: string;
    heap: string;
    indexes: string;
    vacuums: string;
  }>(
    `SELECT s.relname, s.n_dead_tup, s.n_live_tup, pg_relation_size(s.relid) AS heap,
            pg_indexes_size(s.relid) AS indexes, s.vacuum_count + s.autovacuum_count AS vacuums
       FROM pg_stat_user_tables s WHERE s.relname = ANY ($1::text[])`,
    [TABLES],
  );
  const idx = await client.query<{ bytes: string }>(
    `SELECT pg_relation_size('outbox_unpublished_idx') AS bytes`,
  );
  const tables = {} as Record<Table, TableFigures>;
  for (const r of rows) {
    tables[r.relname] = {
      deadTuples: Number(r.n_dead_tup),
      liveTuples: Number(r.n_live_tup),
      heapBytes: Number(r.heap),
      indexBytes: Number(r.indexes),
      vacuums: Number(r.vacuums),
    };
  }
  return { tables, unpublishedIndexBytes: Number(idx.rows[0]?.bytes ?? 0) };
}

interface Explained {
  ms: number;
  buffers: number;
  rows: number;
  /** The plan's nodes, outermost first (`Index Scan on outbox_unpublished_idx`, `Seq Scan on outbox`). */
  plan: string;
}

type PlanNode = Record<string, unknown> & { Plans?: PlanNode[] };

function planShape(node: PlanNode): string {
  const on = node['Index Name'] ?? node['Relation Name'];
  const here = `${String(node['Node Type'])}${on ? ` on ${String(on)}` : ''}`;
  const below = (node.Plans ?? []).map(planShape);
  return below.length ? `${here} > ${below.join(', ')}` : here;
}

/** EXPLAIN ANALYZE of a statement in a transaction rolled back (the claim's row locks go with it). */
async function explain(
  client: pg.Client,
  sql: string,
  params: readonly SqlParam[],
): Promise<Explained> {
  await client.query('BEGIN');
  try {
    const { rows } = await client.query<{ 'QUERY PLAN': Record<string, unknown>[] }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${sql}`,
      params as unknown[],
    );
    const top = rows[0]?.['QUERY PLAN'][0] ?? {};
    const plan = (top.Plan ?? {}) as Record<string, number>;
    return {
      ms: round2(Number(top['Execution Time'] ?? Number.NaN)),
      buffers: (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0),
      rows: plan['Actual Rows'] ?? 0,
      plan: planShape((top.Plan ?? {}) as PlanNode),
    };
  } finally {
    await client.query('ROLLBACK');
  }
}

/** Whether an ACCESS EXCLUSIVE lock on `outbox` (TRUNCATE, DROP or DETACH of it) has to wait. */
async function exclusiveLockWaits(client: pg.Client): Promise<boolean> {
  await client.query('BEGIN');
  try {
    await client.query(`SET LOCAL lock_timeout = '300ms'`);
    await client.query('LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE');
    return false;
  } catch (err) {
    if ((err as { code?: string }).code === '55P03') return true;
    throw err;
  } finally {
    await client.query('ROLLBACK');
  }
}

interface WindowResult {
  label: string;
  /** Seconds of this side's flow (its slices), and the slices. */
  seconds: number;
  slices: number;
  pinned: boolean;
  claim: Claim;
  relayPerSecond: number;
  reservesPerSecond: number;
  writerPerSecond: number;
  /** Relay rounds: duration, how many, and the share that claimed a full batch. */
  relayRoundMs: { median: number; p99: number; rounds: number; fullShare: number };
  reserveCallMs: { median: number; p99: number };
  /** Mean ms of each of the relay's statements, and of the rest of a round (publish, BEGIN/COMMIT). */
  statementMs: { hasClaimable: number; claim: number; mark: number; restOfRound: number };
  /** Rows published and reserves per second, slice by slice (the trend while pinned). */
  sliceRates: { relay: number[]; reserve: number[] };
  /** At the end of the window (pg_stat_user_tables, pg_relation_size, pg_indexes_size). */
  tables: Record<Table, TableFigures>;
  unpublishedIndexBytes: number;
  /** Vacuum runs in the window (the emulated autovacuum's, or the server's). */
  vacuumRuns: Partial<Record<Table, number>>;
  /** Quiet probes after the flow stopped (the pin still held in a pinned window). */
  probe: {
    /** The full (unbounded) claim and probe. */
    claim: Explained;
    hasClaimable: Explained;
    /** The bounded ones, as the relay last ran them (production claim only). */
    boundedClaim?: Explained;
    boundedHasClaimable?: Explained;
    reserveMs: number;
    exclusiveLockWaits?: boolean;
  };
  /** The pin's xmin, and how many xids the server assigned since (the horizon's age). */
  pin?: { xmin: string; xidsSincePin: number };
  /** The relays' claims by kind (`OutboxRelay.claimCounts`, summed over the loops). */
  claims: ClaimCounts;
  errors: Measure['errors'];
  /** The machine's 1-minute load average at the end of the window. */
  loadAverage: number;
}

function newMeasure(
  run: Run,
  side: Side,
  label: string,
  claim: Claim,
  pinned: boolean,
  backlog: number,
): Measure {
  const timings: Timings = { hasClaimable: [], claim: [], mark: [] };
  const seen: Seen = {};
  return {
    label,
    claim,
    pinned,
    seen,
    relays: Array.from(
      { length: run.o.concurrency },
      () =>
        new OutboxRelay(
          { db: new RelayDb(side.db, timings, seen), publisher: side.publisher },
          {
            table: 'outbox',
            batchSize: run.o.batchSize,
            maxAttempts: 10,
            ...(claim === 'unbounded' ? { fullClaimEveryMs: 0 } : {}),
          },
        ),
    ),
    activeMs: 0,
    backlog,
    published: 0,
    inserted: 0,
    reserves: 0,
    roundMs: [],
    fullRounds: 0,
    reserveMs: [],
    sliceRates: { relay: [], reserve: [] },
    timings,
    vacuums: {},
    errors: { relay: 0, writer: 0, reserve: 0 },
  };
}

const dist = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return { median: round2(median(sorted)), p99: round2(quantile(sorted, 0.99)) };
};
const mean = (xs: number[]) => (xs.length ? round2(xs.reduce((a, b) => a + b, 0) / xs.length) : 0);
const mb = (bytes: number | undefined) =>
  bytes === undefined ? '?' : `${round2(bytes / 1_048_576)} MB`;

async function finish(
  run: Run,
  side: Side,
  m: Measure,
  before: Record<Table, TableFigures> | undefined,
  pin: Pin | undefined,
): Promise<WindowResult> {
  const { tables, unpublishedIndexBytes } = await tableFigures(side.meter);
  const vacuumRuns: Partial<Record<Table, number>> = {};
  for (const t of TABLES) {
    vacuumRuns[t] = run.autovacuum.serverOn
      ? (tables[t]?.vacuums ?? 0) - (before?.[t]?.vacuums ?? 0)
      : (m.vacuums[t]?.runs ?? 0);
  }
  const pinAge = pin
    ? await side.meter.query<{ age: number }>(
        'SELECT age(backend_xmin) AS age FROM pg_stat_activity WHERE pid = $1',
        [pin.pid],
      )
    : undefined;
  const seen = m.seen;
  if (!seen.claim || !seen.hasClaimable) throw new Error('the relay ran no full claim');
  const claims: ClaimCounts = { full: 0, bounded: 0, widened: 0 };
  for (const relay of m.relays) {
    for (const k of Object.keys(claims) as (keyof ClaimCounts)[]) claims[k] += relay.claimCounts[k];
  }
  const probe: WindowResult['probe'] = {
    claim: await explain(side.meter, seen.claim.sql, seen.claim.params),
    hasClaimable: await explain(side.meter, seen.hasClaimable.sql, seen.hasClaimable.params),
    reserveMs: 0,
  };
  if (seen.boundedClaim)
    probe.boundedClaim = await explain(side.meter, seen.boundedClaim.sql, seen.boundedClaim.params);
  if (seen.boundedHasClaimable)
    probe.boundedHasClaimable = await explain(
      side.meter,
      seen.boundedHasClaimable.sql,
      seen.boundedHasClaimable.params,
    );
  probe.reserveMs = round2(median(await side.reserve.probe(30)));
  if (pin) probe.exclusiveLockWaits = await exclusiveLockWaits(side.meter);
  const seconds = m.activeMs / 1000;
  const t = m.timings;
  const statements = [...t.hasClaimable, ...t.claim, ...t.mark].reduce((a, b) => a + b, 0);
  const r: WindowResult = {
    label: m.label,
    seconds: round2(seconds),
    slices: m.sliceRates.relay.length,
    pinned: m.pinned,
    claim: m.claim,
    relayPerSecond: Math.round(m.published / seconds),
    reservesPerSecond: Math.round(m.reserves / seconds),
    writerPerSecond: Math.round(m.inserted / seconds),
    relayRoundMs: {
      ...dist(m.roundMs),
      rounds: m.roundMs.length,
      fullShare: round2(m.fullRounds / Math.max(1, m.roundMs.length)),
    },
    reserveCallMs: dist(m.reserveMs),
    statementMs: {
      hasClaimable: mean(t.hasClaimable),
      claim: mean(t.claim),
      mark: mean(t.mark),
      restOfRound: round2(mean(m.roundMs) - statements / Math.max(1, t.claim.length)),
    },
    sliceRates: m.sliceRates,
    tables,
    unpublishedIndexBytes,
    vacuumRuns,
    probe,
    ...(pin ? { pin: { xmin: pin.xmin, xidsSincePin: Number(pinAge?.rows[0]?.age ?? 0) } } : {}),
    claims,
    errors: m.errors,
    loadAverage: round2(loadavg()[0] ?? 0),
  };
  const ob = r.tables.outbox;
  progress(
    `    ${side.name} ${r.label}: relay ${r.relayPerSecond} rows/s (round median ${r.relayRoundMs.median} ms, ${Math.round(r.relayRoundMs.fullShare * 100)} % full; hasClaimable ${r.statementMs.hasClaimable} + claim ${r.statementMs.claim} ms), reserve ${r.reservesPerSecond}/s, writer ${r.writerPerSecond} rows/s; outbox ${ob?.deadTuples ?? '?'} dead tuples, ${mb(ob?.heapBytes)} + ${mb(ob?.indexBytes)} indexes; claims ${claims.full} full, ${claims.bounded} bounded (${claims.widened} widened); quiet claim ${probe.claim.ms} ms / ${probe.claim.buffers} buffers${probe.boundedClaim ? `, bounded ${probe.boundedClaim.ms} ms / ${probe.boundedClaim.buffers} buffers` : ''}; relay by slice ${r.sliceRates.relay.join(' ')}`,
  );
  return r;
}

interface Pin {
  pid: number;
  /** The snapshot's xmin: the horizon of the database while the pin is held. */
  xmin: string;
  release(): Promise<void>;
}

/** The fault: a session of its own on the side's database, idle in a transaction holding a snapshot. */
async function pinHorizon(url: string): Promise<Pin> {
  const client = new pg.Client({ connectionString: url, application_name: 'bench-pin' });
  client.on('error', () => {});
  await client.connect();
  for (const statement of PIN_STATEMENTS) await client.query(statement);
  const { rows } = await client.query<{ xmin: string; pid: number }>(
    'SELECT backend_xmin::text AS xmin, pid FROM pg_stat_activity WHERE pid = pg_backend_pid()',
  );
  return {
    pid: rows[0]?.pid as number,
    xmin: rows[0]?.xmin as string,
    async release() {
      await client.query('ROLLBACK').catch(() => {});
      await client.end().catch(() => {});
    },
  };
}

/** Empty tables, the writer's backlog in place, VACUUM (ANALYZE): how every compared window starts. */
async function reset(side: Side, cap: number): Promise<void> {
  await side.meter.query('TRUNCATE outbox, processed_messages, reservations, inventory_outbox');
  const store = new OutboxStore('outbox');
  for (let i = 0; i < cap; i += WRITE_BATCH) {
    const rows = Array.from({ length: WRITE_BATCH }, () => orderCreated(i));
    await side.db.transaction((tx) => store.appendMany(tx, rows));
  }
  await side.meter.query(`VACUUM (ANALYZE) ${TABLES.join(', ')}`);
}

async function backlogOf(side: Side): Promise<number> {
  const { rows } = await side.meter.query<{ n: string }>(
    'SELECT count(*) AS n FROM outbox WHERE published_at IS NULL AND needs_attention_at IS NULL',
  );
  return Number(rows[0]?.n ?? 0);
}

/**
 * `slices` slices of each measure, alternated (ABBA…: drift on a shared machine hits both alike);
 * `measures[i]` runs on `sides[i]`.
 */
async function alternate(
  run: Run,
  sides: readonly [Side, Side],
  measures: readonly [Measure, Measure],
  slices: number,
): Promise<void> {
  for (let i = 0; i < slices; i++) {
    const order = i % 2 ? [1, 0] : [0, 1];
    for (const k of order) await runSlice(run, sides[k] as Side, measures[k] as Measure, SLICE_MS);
  }
}

/** Two windows side by side: `a` without the pin, `b` with it (pinned before, released after). */
async function pair(
  run: Run,
  sides: readonly [Side, Side],
  claim: Claim,
  slices: number,
  labels: readonly [string, string],
): Promise<{ without: WindowResult; withPin: WindowResult; measures: [Measure, Measure] }> {
  const [a, b] = sides;
  for (const side of sides) await reset(side, run.cap);
  const before = run.autovacuum.serverOn
    ? await Promise.all(sides.map(async (s) => (await tableFigures(s.meter)).tables))
    : [undefined, undefined];
  const measures: [Measure, Measure] = [
    newMeasure(run, a, labels[0], claim, false, run.cap),
    newMeasure(run, b, labels[1], claim, true, run.cap),
  ];
  const pin = await pinHorizon(b.scratch.database.url);
  try {
    await alternate(run, sides, measures, slices);
    const without = await finish(run, a, measures[0], before[0], undefined);
    const withPin = await finish(run, b, measures[1], before[1], pin);
    return { without, withPin, measures };
  } finally {
    await pin.release();
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

const brief = (w: WindowResult) => ({
  relayPerSecond: w.relayPerSecond,
  reservesPerSecond: w.reservesPerSecond,
  writerPerSecond: w.writerPerSecond,
  deadTuples: Object.fromEntries(TABLES.map((t) => [t, w.tables[t]?.deadTuples])),
});

async function openSide(scratch: ScratchEnvironment, name: string): Promise<Side> {
  const db = scratch.database.db;
  const backend = scratch.backend('rabbitmq', BENCH_BACKEND, {
    connectionName: `bench-pinned-${name}`,
    publish: { window: 1000 },
  });
  await backend.prepare('publish');
  for (let i = 0; i < SKUS; i++) await setStock(db, `SKU-${i}`, 1_000_000_000);
  const client = () =>
    new pg.Client({ connectionString: scratch.database.url, application_name: 'bench-meter' });
  const meter = client();
  const vacuumer = client();
  meter.on('error', () => {});
  vacuumer.on('error', () => {});
  await meter.connect();
  await vacuumer.connect();
  return {
    name,
    scratch,
    db,
    publisher: backend.publisher('outbox'),
    purge: () =>
      backend.withChannel(async (ch) => {
        await ch.purgeQueue(RABBITMQ_NAMES.inventoryQueue);
        await ch.purgeQueue(RABBITMQ_NAMES.auditQueue);
      }),
    meter,
    vacuumer,
    reserve: new ReserveWorker({ databaseUrl: scratch.database.url, skus: SKUS }),
  };
}

async function closeSide(side: Side): Promise<void> {
  await side.reserve.close();
  await side.meter.end().catch(() => {});
  await side.vacuumer.end().catch(() => {});
}

/**
 * The phase. Two databases of the same server, A and B, each with the whole flow (relay loops,
 * writer, reserve thread), run alternately in 5-second slices (ABBA…), so that the machine's drift
 * hits both alike; B's horizon is pinned by a session of its own (a snapshot, no xid: see
 * `PIN_STATEMENTS`) for its whole window, A's is not. Then B's pin is released and both run on,
 * as they were, for a third as long. The relay claims as deployed (bounded: `OutboxRelay`). When
 * it loses `MAX_LOSS` or more (or when asked), the same pair again with the claim before the bound
 * (`unbounded`) on both, for comparison.
 */
export async function benchPinnedHorizon(
  env: Env,
  o: PinnedHorizonOptions,
): Promise<Record<string, BenchFigure>> {
  const phaseStarted = performance.now();
  const pool = { poolSize: o.concurrency + 2 };
  return withBenchEnvironment(
    env,
    'pinned_a',
    (envA) =>
      withBenchEnvironment(
        env,
        'pinned_b',
        async (envB) => {
          const sides: [Side, Side] = [await openSide(envA, 'A'), await openSide(envB, 'B')];
          try {
            return await phase(o, sides, phaseStarted);
          } finally {
            for (const side of sides) await closeSide(side);
          }
        },
        pool,
      ),
    pool,
  );
}

async function phase(
  o: PinnedHorizonOptions,
  sides: [Side, Side],
  phaseStarted: number,
): Promise<Record<string, BenchFigure>> {
  const autovacuum = await readAutovacuum(sides[0].meter);
  const { costDelayMs, costLimit } = autovacuum.rule;
  for (const side of sides) {
    await side.vacuumer.query(`SET vacuum_cost_delay = '${costDelayMs}ms'`);
    await side.vacuumer.query(`SET vacuum_cost_limit = ${costLimit}`);
  }
  const run: Run = { o, autovacuum, cap: 8 * o.batchSize * o.concurrency };
  const slices = Math.max(1, Math.round((o.seconds * 1000) / SLICE_MS));
  const afterSlices = Math.max(1, Math.round(slices / 3));
  const autovacuumText = autovacuum.serverOn
    ? "the server's"
    : `emulated (the server's is off): a visit per ${NAPTIME_MS / 1000}-s slice (Aurora's naptime), the server's thresholds, cost delay ${costDelayMs} ms, limit ${costLimit}`;
  progress(
    `  pinned horizon: databases A (no pin) and B (pinned), each ${o.concurrency} relay loops (batches of ${o.batchSize}), a writer, a reserve thread; ${slices} slices of ${SLICE_MS / 1000} s each, alternated; autovacuum ${autovacuumText}`,
  );
  // warm-up (connections, plans, JIT), not measured
  for (const side of sides) {
    await reset(side, run.cap);
    await runSlice(
      run,
      side,
      newMeasure(run, side, 'warm-up', 'production', false, run.cap),
      3_000,
    );
  }
  const main = await pair(run, sides, 'production', slices, ['without pin', 'with pin']);
  // B released: both go on as they were (no reset, no VACUUM but autovacuum's)
  const after: [Measure, Measure] = [
    newMeasure(run, sides[0], 'after (no pin)', 'production', false, await backlogOf(sides[0])),
    newMeasure(run, sides[1], 'after release', 'production', false, await backlogOf(sides[1])),
  ];
  await alternate(run, sides, after, afterSlices);
  const afterA = await finish(run, sides[0], after[0], undefined, undefined);
  const afterB = await finish(run, sides[1], after[1], undefined, undefined);
  const { without, withPin } = main;
  const relayLoss = lossPercent(without.relayPerSecond, withPin.relayPerSecond);
  const reserveLoss = lossPercent(without.reservesPerSecond, withPin.reservesPerSecond);
  const endLoss = (k: 'relay' | 'reserve', a: WindowResult, b: WindowResult) =>
    lossPercent(lastThird(a.sliceRates[k]), lastThird(b.sliceRates[k]));
  const relayEndLoss = endLoss('relay', without, withPin);
  const reserveEndLoss = endLoss('reserve', without, withPin);
  /** The same pair with the claim before the bound. */
  let alternative: { without: WindowResult; withPin: WindowResult } | undefined;
  const missed = (loss: number) => !(loss < MAX_LOSS * 100);
  const mode = o.alternative ?? 'auto';
  if (mode === 'always' || (mode === 'auto' && (missed(relayLoss) || missed(reserveLoss)))) {
    progress(
      `  ${mode === 'always' ? 'asked for' : `loss ≥ ${MAX_LOSS * 100} % (relay ${relayLoss} %, reserve ${reserveLoss} %)`}: the same pair with the claim before the bound (every claim unbounded, fullClaimEveryMs 0)`,
    );
    const alt = await pair(run, sides, 'unbounded', slices, [
      'unbounded claim, without pin',
      'unbounded claim, with pin',
    ]);
    alternative = { without: alt.without, withPin: alt.withPin };
  }
  const phaseSeconds = Math.round((performance.now() - phaseStarted) / 1000);
  const status = (loss: number) => (missed(loss) ? 'MISSED' : 'met');
  const claimMs = (w: WindowResult) => round2(w.statementMs.hasClaimable + w.statementMs.claim);
  const boundedMs = (w: WindowResult) =>
    w.probe.boundedClaim && w.probe.boundedHasClaimable
      ? round2(w.probe.boundedClaim.ms + w.probe.boundedHasClaimable.ms)
      : '–';
  progress(
    `  pinned horizon (${phaseSeconds} s): relay ${without.relayPerSecond} → ${withPin.relayPerSecond} rows/s with the pin (loss ${relayLoss} %, goal < ${MAX_LOSS * 100} %: ${status(relayLoss)}; over the last third ${relayEndLoss} %), reserve ${without.reservesPerSecond} → ${withPin.reservesPerSecond}/s (loss ${reserveLoss} %: ${status(reserveLoss)}; last third ${reserveEndLoss} %); outbox dead tuples ${without.tables.outbox?.deadTuples} → ${withPin.tables.outbox?.deadTuples}; the relay's two claim statements ${claimMs(without)} → ${claimMs(withPin)} ms per round (alone at the end, full: ${round2(without.probe.claim.ms + without.probe.hasClaimable.ms)} → ${round2(withPin.probe.claim.ms + withPin.probe.hasClaimable.ms)} ms, bounded: ${boundedMs(without)} → ${boundedMs(withPin)} ms); after the release: relay ${afterB.relayPerSecond} vs ${afterA.relayPerSecond} rows/s, reserve ${afterB.reservesPerSecond} vs ${afterA.reservesPerSecond}/s`,
  );
  const common = {
    seconds: round2((slices * SLICE_MS) / 1000),
    sliceSeconds: SLICE_MS / 1000,
    afterSeconds: round2((afterSlices * SLICE_MS) / 1000),
    batchSize: o.batchSize,
    concurrency: o.concurrency,
    pin: PIN_STATEMENTS.join('; '),
    autovacuum: autovacuumText,
    boundaryVacuum:
      'both databases: TRUNCATE, the backlog refilled, VACUUM (ANALYZE), then B pinned; after the release no reset and no VACUUM but autovacuum',
    phaseSeconds,
    summary: {
      without: brief(without),
      withPin: brief(withPin),
      afterNoPin: brief(afterA),
      afterRelease: brief(afterB),
      ...(alternative
        ? {
            unboundedWithout: brief(alternative.without),
            unboundedWithPin: brief(alternative.withPin),
          }
        : {}),
    },
  };
  const figures: Record<string, BenchFigure> = {
    'scale.pinned.relay': figure(withPin.relayPerSecond, 'rows/s', without.relayPerSecond, {
      goal: { on: 'ratio', min: 1 - MAX_LOSS },
      lossPercent: relayLoss,
      lossLastThirdPercent: relayEndLoss,
      afterReleaseRatio: round2(afterB.relayPerSecond / Math.max(1, afterA.relayPerSecond)),
      what: `relay rows published per second (${o.concurrency} loops, claim ${o.batchSize} bounded at the oldest row last claimed − ${DEFAULT_CLAIM_MARGIN_MS} ms with a full claim every ${DEFAULT_FULL_CLAIM_EVERY_MS / 1000} s, publish to RabbitMQ, mark) with a session pinning the horizon (idle in a REPEATABLE READ transaction, its snapshot taken) for ${common.seconds} s of flow, writer and reserve running`,
      baselineName: 'the same flow in another database without the pin, slices alternated',
      ...common,
      windows: { without, withPin, afterNoPin: afterA, afterRelease: afterB },
    }),
    'scale.pinned.reserve': figure(
      withPin.reservesPerSecond,
      'reserves/s',
      without.reservesPerSecond,
      {
        goal: { on: 'ratio', min: 1 - MAX_LOSS },
        lossPercent: reserveLoss,
        lossLastThirdPercent: reserveEndLoss,
        afterReleaseRatio: round2(afterB.reservesPerSecond / Math.max(1, afterA.reservesPerSecond)),
        what: `reserve calls per second (ReserveInventory, one message each, ${SKUS} SKUs, a thread of its own) with a session pinning the horizon for ${common.seconds} s of flow, relay and writer running`,
        baselineName: 'the same flow in another database without the pin, slices alternated',
        ...common,
      },
    ),
  };
  if (alternative) {
    const altLoss = lossPercent(
      alternative.without.relayPerSecond,
      alternative.withPin.relayPerSecond,
    );
    const altReserveLoss = lossPercent(
      alternative.without.reservesPerSecond,
      alternative.withPin.reservesPerSecond,
    );
    const versus = round2(withPin.relayPerSecond / Math.max(1, alternative.withPin.relayPerSecond));
    progress(
      `  claim before the bound (unbounded): relay ${alternative.without.relayPerSecond} → ${alternative.withPin.relayPerSecond} rows/s with the pin (loss ${altLoss} %: ${status(altLoss)}), reserve ${alternative.without.reservesPerSecond} → ${alternative.withPin.reservesPerSecond}/s (loss ${altReserveLoss} %: ${status(altReserveLoss)}); claim statements ${claimMs(alternative.without)} → ${claimMs(alternative.withPin)} ms per round; pinned, the bounded claim publishes ${versus}× its rows/s`,
    );
    figures['scale.pinned.relay.unbounded'] = figure(
      alternative.withPin.relayPerSecond,
      'rows/s',
      alternative.without.relayPerSecond,
      {
        goal: { on: 'ratio', min: 1 - MAX_LOSS },
        lossPercent: altLoss,
        lossLastThirdPercent: endLoss('relay', alternative.without, alternative.withPin),
        productionVersusThisWithPin: versus,
        what: 'as scale.pinned.relay with the claim before the bound (OutboxRelay with fullClaimEveryMs 0: every claim reads the partial index from its oldest entry)',
        baselineName: 'the same claim in another database without the pin, slices alternated',
        ...common,
        windows: alternative,
      },
    );
    figures['scale.pinned.reserve.unbounded'] = figure(
      alternative.withPin.reservesPerSecond,
      'reserves/s',
      alternative.without.reservesPerSecond,
      {
        goal: { on: 'ratio', min: 1 - MAX_LOSS },
        lossPercent: altReserveLoss,
        lossLastThirdPercent: endLoss('reserve', alternative.without, alternative.withPin),
        what: 'as scale.pinned.reserve, the relay claiming as before the bound',
        baselineName: 'the same claim in another database without the pin, slices alternated',
        ...common,
      },
    );
  }
  return figures;
}
