import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../devkit/freePort.js';
import { type Memory, type NodeProcess, readMemory } from '../devkit/processes.js';
import type { ScratchEnvironment } from '../devkit/scratch.js';
import type { Env } from '../shared/config/env.js';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { setStock } from '../shared/inventory/stock.js';
import { createSqsClient } from '../shared/transport/sqs/index.js';
import type { DeployedTransport } from './deployed.js';
import { withBenchEnvironment } from './environment.js';
import { type FixedRateResult, fixedRateLoad, maxThroughput, round1 } from './load.js';
import {
  buildDevBundle,
  FAUXQS_SERVER,
  RAW_HTTP_SERVER,
  ROLE_STOP_GRACE_MS,
  startRole,
} from './processes.js';
import { progress } from './progress.js';
import { type RawLatency, rawRabbitLatency, rawSqsLatency } from './rawLatency.js';
import { type BenchFigure, figure } from './report.js';

/**
 * The end-to-end benchmark, per transport: raw baselines first, alone on the machine; then the
 * pipeline's processes (an SQS server of its own on SQS, and the `npm run dev` roles, bundled)
 * under a fixed offered rate, measured from the database's own timestamps; the closed-loop
 * saturation; the step-up search of the sustainable rate; the figures. Every process started is
 * added to `started`, which the run stops, last first, whatever happens.
 */

interface E2eOptions {
  transports: DeployedTransport[];
  /** Orders per second of the fixed-rate run. */
  rate: number;
  /** Measured seconds of the fixed-rate run, after `warmupSeconds` at the same rate. */
  seconds: number;
  warmupSeconds: number;
  /** Seconds of each raw baseline at the same rate (HTTP server, broker latency). */
  rawSeconds: number;
  /** Seconds of each closed-loop saturation run (autocannon). */
  maxSeconds: number;
  /** Step-up search of the highest sustainable rate: from, step, up to, seconds per step. */
  search: SearchSettings | undefined;
  skus: number;
  /** POWERTOOLS_LOG_LEVEL of the roles (INFO = as deployed; the logs are discarded). */
  logLevel: string;
  /** Write a V8 CPU profile of each role (node --cpu-prof) into this folder. */
  profileDir?: string | undefined;
  /** NODE_OPTIONS of the roles (e.g. --max-old-space-size=64). */
  nodeOptions?: string | undefined;
  /** Which figures to report: the pipeline's, the roles' memory, or both. */
  report: { e2e: boolean; memory: boolean };
}

const orderBody = (skus: number) => (i: number) => `{"sku":"SKU-${i % skus}","quantity":1}`;

async function runTransport(
  env: Env,
  transport: DeployedTransport,
  o: E2eOptions,
  bundle: string,
): Promise<Record<string, BenchFigure>> {
  return withBenchEnvironment(
    env,
    `e2e_${transport}`,
    async (scratch) => {
      const db = scratch.database.db;
      const started: NodeProcess[] = [];
      const say = (line: string) => progress(`  [${transport}] ${line}`);
      try {
        for (let i = 0; i < o.skus; i++) await setStock(db, `SKU-${i}`, 1_000_000_000);
        const broker = await E2E_BROKERS[transport]({ scratch, region: env.AWS_REGION, started });
        const childEnv: NodeJS.ProcessEnv = {
          // both services' schemas in the one scratch database: the figures read both sides'
          // timestamps in one query (the lab and the soak run each service in its own)
          DATABASE_URL: scratch.database.url,
          INVENTORY_DATABASE_URL: scratch.database.url,
          AMQP_URL: scratch.vhost?.amqpUrl,
          RABBITMQ_MANAGEMENT_URL: env.RABBITMQ_MANAGEMENT_URL,
          POWERTOOLS_LOG_LEVEL: o.logLevel,
          FAULTS: '',
          ...broker.env,
        };

        // Raw baselines first, alone on the machine.
        const raw = await rawBaselines({
          rate: o.rate,
          seconds: o.rawSeconds,
          body: orderBody(o.skus),
          rawLatency: broker.rawLatency,
          started,
          say,
        });

        // The pipeline: API, relay and consumer, each a process of its own (npm run dev roles).
        const pipeline = await startPipeline({ bundle, transport, childEnv, o, started });
        const { stats, load, memory, ok } = await fixedRateRun(db, pipeline, o, say);
        say(
          `  peak RSS: api ${memory.api.peakMb} MB, relay ${memory.relay.peakMb} MB, consumer ${memory.consumer.peakMb} MB (raw node:http ${raw.rawMemory.peakMb} MB)`,
        );

        const common = {
          transport,
          rate: o.rate,
          seconds: o.seconds,
          warmupSeconds: o.warmupSeconds,
        };
        const figures: Record<string, BenchFigure> = o.report.memory
          ? memoryFigures(common, memory, raw.rawMemory, o.rawSeconds)
          : {};
        if (!o.report.e2e) return figures;

        const saturated = await saturation({
          rawUrl: raw.rawUrl,
          apiUrl: pipeline.apiUrl,
          body: orderBody(o.skus)(0),
          seconds: o.maxSeconds,
          say,
        });
        await drained(db, 300_000);

        // Step-up search: the highest rate at which the pipeline keeps up.
        const steps = o.search
          ? await stepUpSearch({
              db,
              apiUrl: pipeline.apiUrl,
              search: o.search,
              body: orderBody(o.skus),
              say,
            })
          : [];
        Object.assign(
          figures,
          pipelineFigures({
            common,
            stats,
            load,
            drained: ok,
            raw,
            saturation: saturated,
            search: o.search,
            steps,
          }),
        );
        return figures;
      } finally {
        for (const r of [...started].reverse()) await r.stop(ROLE_STOP_GRACE_MS);
      }
    },
    { poolSize: 2 },
  );
}

/**
 * The fixed-rate run: `warmupSeconds + seconds` at `rate` orders per second, a progress line
 * every 5 s; the roles' memory right after; then the pipeline's figures for the measured window
 * once it has drained (or 120 s).
 */
async function fixedRateRun(
  db: PgDatabase,
  pipeline: Awaited<ReturnType<typeof startPipeline>>,
  o: E2eOptions,
  say: (line: string) => void,
) {
  const { api, relay, consumer } = pipeline;
  const total = o.warmupSeconds + o.seconds;
  say(
    `pipeline at ${o.rate} orders/s for ${total} s (${o.warmupSeconds} s warm-up, then ${o.seconds} s measured)`,
  );
  const started = Date.now();
  let lastLine = 0;
  const load: FixedRateResult = await fixedRateLoad({
    url: pipeline.apiUrl,
    rate: o.rate,
    durationMs: total * 1000,
    body: orderBody(o.skus),
    onSecond: (sent, ok) => {
      const s = Math.round((Date.now() - started) / 1000);
      if (s - lastLine < 5) return;
      lastLine = s;
      void Promise.all([backlog(db), readMemory(relay.pid), readMemory(consumer.pid)]).then(
        ([b, rm, cm]) =>
          say(
            `  ${s} s: sent ${sent}, answered ${ok}, not reserved yet ${b.pending} (unpublished ${b.unpublished}), RSS relay ${rm?.rssMb} MB, consumer ${cm?.rssMb} MB`,
          ),
        () => {},
      );
    },
  });
  const ended = new Date();
  const memory = {
    api: (await readMemory(api.pid)) as Memory,
    relay: (await readMemory(relay.pid)) as Memory,
    consumer: (await readMemory(consumer.pid)) as Memory,
  };
  const ok = await drained(db, 120_000);
  const stats = await windowStats(db, new Date(started + o.warmupSeconds * 1000), ended);
  say(
    `  answered ${load.ok}/${load.sent} (failed ${load.failed}, missed ${load.missed}), HTTP p99 ${load.latencyMs.p99} ms; ${stats.throughput} reservations/s, e2e p50 ${stats.e2eMs.p50} / p99 ${stats.e2eMs.p99} ms, outbox lag p50 ${stats.lagMs.p50} / p99 ${stats.lagMs.p99} ms${ok ? '' : ' (NOT DRAINED in 120 s)'}`,
  );
  return { load, memory, ok, stats };
}

/** The end-to-end suite (and the memory figures sampled under its load), per transport. */
export async function benchE2e(env: Env, o: E2eOptions): Promise<Record<string, BenchFigure>> {
  const bundle = await buildDevBundle();
  const figures: Record<string, BenchFigure> = {};
  for (const t of o.transports) Object.assign(figures, await runTransport(env, t, o, bundle));
  return figures;
}

/**
 * Each transport's broker in an end-to-end run (RabbitMQ: the run's virtual host; SQS: a server
 * of the run's own): the roles' variables beyond the pipeline's, and the bare broker's latency.
 */
const E2E_BROKERS: Record<
  DeployedTransport,
  (c: { scratch: ScratchEnvironment; region: string; started: NodeProcess[] }) => Promise<{
    env: NodeJS.ProcessEnv;
    rawLatency(rate: number, seconds: number): Promise<RawLatency>;
  }>
> = {
  rabbitmq: async ({ scratch }) => ({
    env: {},
    rawLatency: (rate, seconds) =>
      rawRabbitLatency(scratch.vhost?.amqpUrl as string, rate, seconds),
  }),
  // fauxqs in a process of its own, so that its CPU is not the bench's
  sqs: async ({ scratch, region, started }) => {
    const port = await freePort();
    const args = ['--input-type=module', '-e', FAUXQS_SERVER];
    started.push(await startRole('fauxqs', args, { PORT: String(port) }, 'listening'));
    const endpoint = `http://127.0.0.1:${port}`;
    return {
      env: { SQS_ENDPOINT: endpoint, SQS_QUEUE_PREFIX: scratch.sqsPrefix },
      rawLatency: (rate, seconds) => {
        const client = createSqsClient({ endpoint, region, requestTimeoutMs: 25_000 });
        return rawSqsLatency(client, `${scratch.sqsPrefix}raw`, rate, seconds).finally(() =>
          client.destroy(),
        );
      },
    };
  },
};

/**
 * The API, the relay and the consumer, started one after the other, each awaited ready; each
 * role's environment is the pipeline's, with its NODE_OPTIONS (and a CPU profile if asked).
 */
async function startPipeline(c: {
  bundle: string;
  transport: string;
  childEnv: NodeJS.ProcessEnv;
  o: Pick<E2eOptions, 'nodeOptions' | 'profileDir'>;
  started: NodeProcess[];
}) {
  const apiPort = await freePort();
  const dev = (role: string) => [c.bundle, '--transport', c.transport, '--role', role];
  const roleEnv = (role: string): NodeJS.ProcessEnv => ({
    ...c.childEnv,
    NODE_OPTIONS: [
      c.o.nodeOptions ?? '',
      c.o.profileDir ? `--cpu-prof --cpu-prof-dir=${c.o.profileDir}/${c.transport}/${role}` : '',
    ]
      .join(' ')
      .trim(),
  });
  const start = async (role: string, extra: string[]) => {
    const p = await startRole(role, [...dev(role), ...extra], roleEnv(role), `${role}:`);
    c.started.push(p);
    return p;
  };
  const api = await start('api', ['--port', String(apiPort)]);
  const relay = await start('relay', ['--relay-loop']);
  const consumer = await start('consumer', []);
  return { api, relay, consumer, apiUrl: `http://127.0.0.1:${apiPort}/orders` };
}

/**
 * The raw baselines of the end-to-end figures, measured in the same run: a trivial node:http
 * server under the same open-loop generator at the same rate (kept running for the saturation
 * run; its peak RSS after its run), a bare broker at the same rate (no database).
 */
async function rawBaselines(c: {
  rate: number;
  seconds: number;
  body: (i: number) => string;
  /** The run's bare broker (`E2E_BROKERS`). */
  rawLatency: (rate: number, seconds: number) => Promise<RawLatency>;
  started: NodeProcess[];
  say: (line: string) => void;
}) {
  const rawPort = await freePort();
  const rawHttp = await startRole(
    'raw-http',
    ['--input-type=module', '-e', RAW_HTTP_SERVER],
    { PORT: String(rawPort) },
    'listening',
  );
  c.started.push(rawHttp);
  const rawUrl = `http://127.0.0.1:${rawPort}/orders`;
  c.say(`raw node:http server at ${c.rate}/s for ${c.seconds} s`);
  const rawLoad = await fixedRateLoad({
    url: rawUrl,
    rate: c.rate,
    durationMs: c.seconds * 1000,
    body: c.body,
  });
  const rawMemory = (await readMemory(rawHttp.pid)) as Memory;
  c.say(
    `  ${rawLoad.achieved} req/s, p50 ${rawLoad.latencyMs.p50} ms, p99 ${rawLoad.latencyMs.p99} ms, peak RSS ${rawMemory.peakMb} MB`,
  );
  c.say(`raw broker latency at ${c.rate}/s for ${c.seconds} s`);
  const rawBroker = await c.rawLatency(c.rate, c.seconds);
  c.say(
    `  confirm p50 ${rawBroker.confirmMs.p50} / p99 ${rawBroker.confirmMs.p99} ms, delivery p50 ${rawBroker.deliverMs.p50} / p99 ${rawBroker.deliverMs.p99} ms`,
  );
  return { rawUrl, rawLoad, rawMemory, rawBroker };
}

/** Closed-loop saturation (autocannon, 32 connections) of the raw server, then of the API. */
async function saturation(c: {
  rawUrl: string;
  apiUrl: string;
  body: string;
  seconds: number;
  say: (line: string) => void;
}) {
  c.say(`saturation (autocannon, 32 connections, ${c.seconds} s): raw node:http, then the API`);
  const max = (url: string) =>
    maxThroughput({ url, body: c.body, seconds: c.seconds, connections: 32 });
  const rawMax = await max(c.rawUrl);
  const apiMax = await max(c.apiUrl);
  c.say(`  raw node:http ${rawMax.rps} req/s, API ${apiMax.rps} orders/s accepted`);
  return { rawMax, apiMax };
}

/**
 * What the end-to-end benchmark reads from the database: the pipeline's figures for a window of
 * orders, from the database's own timestamps, and the backlog of orders not reserved yet.
 */

/** The pipeline's figures for orders placed in [from, to), from the database's own timestamps. */
async function windowStats(db: PgDatabase, from: Date, to: Date) {
  const { rows } = await db.query<{
    orders: string;
    reserved: string;
    committed: string;
    e2e: (number | null)[] | null;
    lag: (number | null)[] | null;
  }>(
    `WITH w AS (
       SELECT o.occurred_at, o.published_at, r.created_at AS reserved_at
         FROM outbox o
         LEFT JOIN reservations r ON r.order_id = o.aggregate_id::uuid
        WHERE o.aggregate_type = 'order' AND o.aggregate_version = 1
          AND o.occurred_at >= $1 AND o.occurred_at < $2)
     SELECT count(*) AS orders, count(reserved_at) AS reserved,
            (SELECT count(*) FROM reservations WHERE created_at >= $1 AND created_at < $2) AS committed,
            percentile_disc(ARRAY[0.5, 0.99, 1]) WITHIN GROUP
              (ORDER BY extract(epoch FROM reserved_at - occurred_at) * 1000) AS e2e,
            percentile_disc(ARRAY[0.5, 0.99, 1]) WITHIN GROUP
              (ORDER BY extract(epoch FROM published_at - occurred_at) * 1000) AS lag
       FROM w`,
    [from, to],
  );
  const r = rows[0];
  const ms = (a: (number | null)[] | null | undefined) => ({
    p50: round1(Number(a?.[0] ?? Number.NaN)),
    p99: round1(Number(a?.[1] ?? Number.NaN)),
    max: round1(Number(a?.[2] ?? Number.NaN)),
  });
  return {
    orders: Number(r?.orders ?? 0),
    reserved: Number(r?.reserved ?? 0),
    // reservations committed per second inside the window
    throughput: round1(Number(r?.committed ?? 0) / ((to.getTime() - from.getTime()) / 1000)),
    e2eMs: ms(r?.e2e),
    lagMs: ms(r?.lag),
  };
}

/** Orders not reserved yet (in the outbox, the broker or the consumer), and unpublished rows. */
async function backlog(db: PgDatabase): Promise<{ pending: number; unpublished: number }> {
  const { rows } = await db.query<{ pending: string; unpublished: string }>(
    `SELECT (SELECT count(*) FROM orders) - (SELECT count(*) FROM reservations) AS pending,
            (SELECT count(*) FROM outbox WHERE published_at IS NULL) AS unpublished`,
  );
  return { pending: Number(rows[0]?.pending), unpublished: Number(rows[0]?.unpublished) };
}

async function drained(db: PgDatabase, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if ((await backlog(db)).pending <= 0) return true;
    await sleep(250);
  }
  return false;
}

/** One step of the step-up search. */
interface Step {
  rate: number;
  achieved: number;
  failed: number;
  missed: number;
  backlogSlopePerS: number;
  backlogAtEnd: number;
  e2eP99Ms: number;
  sustainable: boolean;
  why?: string;
  errors?: Record<string, number>;
}

interface SearchSettings {
  from: number;
  step: number;
  max: number;
  /** Seconds per step. */
  seconds: number;
}

/** Least-squares slope (units per second) of (t ms, value) samples. */
function slopePerSecond(samples: readonly [number, number][]): number {
  const n = samples.length;
  if (n < 2) return 0;
  const mt = samples.reduce((s, [t]) => s + t, 0) / n;
  const mv = samples.reduce((s, [, v]) => s + v, 0) / n;
  let num = 0;
  let den = 0;
  for (const [t, v] of samples) {
    num += (t - mt) * (v - mv);
    den += (t - mt) ** 2;
  }
  return den === 0 ? 0 : (num / den) * 1000;
}

/**
 * The step-up search: the API offered `from`, `from + step`, … orders per second for `seconds`
 * each, until a step is not sustainable (requests failed, the backlog grew or did not drain).
 */
async function stepUpSearch(c: {
  db: PgDatabase;
  apiUrl: string;
  search: SearchSettings;
  body: (i: number) => string;
  say: (line: string) => void;
}): Promise<Step[]> {
  const { db, search } = c;
  const steps: Step[] = [];
  for (let rate = search.from; rate <= search.max; rate += search.step) {
    const samples: [number, number][] = [];
    const t0 = Date.now();
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        samples.push([Date.now() - t0, (await backlog(db)).pending]);
        await sleep(1000);
      }
    })();
    const from = new Date();
    const r = await fixedRateLoad({
      url: c.apiUrl,
      rate,
      durationMs: search.seconds * 1000,
      body: c.body,
    });
    const to = new Date();
    sampling = false;
    await sampler;
    const end = (await backlog(db)).pending;
    const half = samples.filter(([t]) => t >= search.seconds * 500);
    const slope = round1(slopePerSecond(half));
    const drainedAfter = await drained(db, 120_000);
    const w = await windowStats(db, from, to);
    const expected = Math.round(rate * search.seconds);
    const why =
      r.failed + r.missed > 0
        ? `${r.failed + r.missed} requests failed or not sent`
        : r.ok < 0.97 * expected
          ? `API answered ${r.ok} of ${expected}`
          : slope > Math.max(5, 0.02 * rate)
            ? `backlog grew ${slope}/s`
            : end > 2 * rate
              ? `backlog ${end} (> 2 s of orders) at the end`
              : !drainedAfter
                ? 'backlog not drained in 120 s'
                : undefined;
    const step: Step = {
      rate,
      achieved: r.achieved,
      failed: r.failed,
      missed: r.missed,
      backlogSlopePerS: slope,
      backlogAtEnd: end,
      e2eP99Ms: w.e2eMs.p99,
      sustainable: !why,
      ...(why ? { why } : {}),
      ...(r.errors ? { errors: r.errors } : {}),
    };
    steps.push(step);
    c.say(
      `  step ${rate}/s: answered ${r.achieved}/s, backlog slope ${slope}/s, at end ${end}, e2e p99 ${w.e2eMs.p99} ms → ${why ? `not sustainable (${why}${r.errors ? `: ${JSON.stringify(r.errors)}` : ''})` : 'sustainable'}`,
    );
    if (why) break;
  }
  return steps;
}

/** What every end-to-end figure of a transport carries. */
type Common = Pick<E2eOptions, 'rate' | 'seconds' | 'warmupSeconds'> & {
  transport: DeployedTransport;
};

/** The latency goals (ms) by figure (`p99`, `lag.p99`), per transport: RabbitMQ's. */
const LATENCY_GOALS_MS: Record<DeployedTransport, Partial<Record<string, number>>> = {
  rabbitmq: { p99: 500, 'lag.p99': 250 },
  sqs: {},
};

/** Peak RSS of each role after the fixed-rate run, beside the raw server's. */
function memoryFigures(
  common: Common,
  memory: Record<'api' | 'relay' | 'consumer', Memory>,
  rawMemory: Memory,
  rawSeconds: number,
): Record<string, BenchFigure> {
  const figures: Record<string, BenchFigure> = {};
  for (const r of ['relay', 'consumer', 'api'] as const) {
    figures[`memory.${common.transport}.${r}`] = figure(memory[r].peakMb, 'MB', rawMemory.peakMb, {
      better: 'lower',
      baselineName: `peak RSS of a trivial node:http server after ${rawSeconds} s at the same rate`,
      what: `peak RSS (VmHWM) of the ${r} process (npm run dev --role ${r}) after the fixed-rate run`,
      ...common,
    });
  }
  return figures;
}

/**
 * The pipeline's figures: throughput at the fixed rate against the raw server's, latencies
 * against the bare broker's, and the sustainable rate against the raw server's saturation.
 */
function pipelineFigures(c: {
  common: Common;
  stats: Awaited<ReturnType<typeof windowStats>>;
  load: FixedRateResult;
  drained: boolean;
  raw: Awaited<ReturnType<typeof rawBaselines>>;
  saturation: Awaited<ReturnType<typeof saturation>>;
  search: SearchSettings | undefined;
  steps: Step[];
}): Record<string, BenchFigure> {
  const { common, stats, load, raw } = c;
  const { transport, rate } = common;
  const figures: Record<string, BenchFigure> = {};
  figures[`e2e.${transport}`] = figure(stats.throughput, 'orders/s', raw.rawLoad.achieved, {
    baselineName: `trivial node:http server under the same open-loop generator at ${rate}/s`,
    what: 'reservations committed per second during the measured window, at a fixed offered rate',
    offered: rate,
    orders: stats.orders,
    reserved: stats.reserved,
    drained: c.drained,
    http: {
      answered: load.ok,
      failed: load.failed,
      missed: load.missed,
      p50Ms: load.latencyMs.p50,
      p99Ms: load.latencyMs.p99,
      rawP50Ms: raw.rawLoad.latencyMs.p50,
      rawP99Ms: raw.rawLoad.latencyMs.p99,
      ...(load.errors ? { errors: load.errors } : {}),
    },
    ...common,
  });
  const latency = (
    key: string,
    value: number,
    baseline: number,
    baselineName: string,
    what: string,
  ) => {
    const goalMs = LATENCY_GOALS_MS[transport][key];
    figures[`e2e.${transport}.${key}`] = figure(value, 'ms', baseline, {
      better: 'lower',
      baselineName,
      what,
      ...(goalMs !== undefined ? { goal: { on: 'value', max: goalMs } } : {}),
      ...common,
    });
  };
  const { rawBroker } = raw;
  const deliver = `raw broker: publish → consumer receives, one message at a time at ${rate}/s, no database`;
  const confirm = `raw broker: publish → confirm, one message at a time at ${rate}/s, no database`;
  const e2eWhat =
    'order commit → reservation commit (outbox.occurred_at → reservations.created_at)';
  const lagWhat = 'order commit → broker confirm (outbox.occurred_at → published_at)';
  latency('p50', stats.e2eMs.p50, rawBroker.deliverMs.p50, deliver, e2eWhat);
  latency('p99', stats.e2eMs.p99, rawBroker.deliverMs.p99, deliver, e2eWhat);
  latency('lag.p50', stats.lagMs.p50, rawBroker.confirmMs.p50, confirm, lagWhat);
  latency('lag.p99', stats.lagMs.p99, rawBroker.confirmMs.p99, confirm, lagWhat);
  if (c.search) {
    const sustainable = c.steps.filter((s) => s.sustainable).at(-1)?.rate ?? 0;
    figures[`e2e.${transport}.sustainable`] = figure(
      sustainable,
      'orders/s',
      c.saturation.rawMax.rps,
      {
        baselineName: 'trivial node:http server, closed loop (autocannon, 32 connections)',
        what: 'highest step of the step-up search at which the backlog did not grow',
        apiAloneMax: c.saturation.apiMax.rps,
        search: c.search,
        steps: c.steps,
        transport,
      },
    );
  }
  return figures;
}
