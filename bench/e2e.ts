import { setTimeout as sleep } from 'node:timers/promises';
import type { Env } from '../shared/config/env.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { setStock } from '../shared/inventory/stock.js';
import { createSqsClient } from '../shared/transport/sqs/client.js';
import { withBenchEnvironment } from './environment.js';
import { type FixedRateResult, fixedRateLoad, maxThroughput, round1 } from './load.js';
import {
  buildDevBundle,
  FAUXQS_SERVER,
  freePort,
  type Memory,
  RAW_HTTP_SERVER,
  Role,
} from './processes.js';
import { type RawLatency, rawRabbitLatency, rawSqsLatency } from './rawLatency.js';
import { type BenchFigure, figure, progress } from './report.js';

export type Transport = 'rabbitmq' | 'sqs';

export interface E2eOptions {
  transports: Transport[];
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
  search: { from: number; step: number; max: number; seconds: number } | undefined;
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

interface WindowStats {
  orders: number;
  reserved: number;
  /** Reservations committed per second inside the window. */
  throughput: number;
  e2eMs: { p50: number; p99: number; max: number };
  lagMs: { p50: number; p99: number; max: number };
}

/** The pipeline's figures for orders placed in [from, to), from the database's own timestamps. */
async function windowStats(db: PgDatabase, from: Date, to: Date): Promise<WindowStats> {
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

const orderBody = (skus: number) => (i: number) => `{"sku":"SKU-${i % skus}","quantity":1}`;

async function runTransport(
  env: Env,
  transport: Transport,
  o: E2eOptions,
  bundle: string,
): Promise<Record<string, BenchFigure>> {
  return withBenchEnvironment(env, `e2e_${transport}`, async ({ name, dbUrl, amqpUrl }) => {
    const db = new PgDatabase({ connectionString: dbUrl, max: 2, applicationName: 'bench-e2e' });
    const roles: Role[] = [];
    const say = (line: string) => progress(`  [${transport}] ${line}`);
    try {
      for (let i = 0; i < o.skus; i++) await setStock(db, `SKU-${i}`, 1_000_000_000);
      const childEnv: NodeJS.ProcessEnv = {
        DATABASE_URL: dbUrl,
        AMQP_URL: amqpUrl,
        RABBITMQ_MANAGEMENT_URL: env.RABBITMQ_MANAGEMENT_URL,
        POWERTOOLS_LOG_LEVEL: o.logLevel,
        FAULTS: '',
      };
      const roleEnv = (role: string): NodeJS.ProcessEnv => ({
        ...childEnv,
        NODE_OPTIONS: [
          o.nodeOptions ?? '',
          o.profileDir ? `--cpu-prof --cpu-prof-dir=${o.profileDir}/${transport}/${role}` : '',
        ]
          .join(' ')
          .trim(),
      });
      let sqsEndpoint: string | undefined;
      if (transport === 'sqs') {
        const port = await freePort();
        roles.push(
          await Role.start(
            'fauxqs',
            ['--input-type=module', '-e', FAUXQS_SERVER],
            { PORT: String(port) },
            'listening',
          ),
        );
        sqsEndpoint = `http://127.0.0.1:${port}`;
        Object.assign(childEnv, {
          SQS_ENDPOINT: sqsEndpoint,
          SQS_QUEUE_PREFIX: `${name.replace(/_/g, '-')}-`,
        });
      }

      // Raw baselines first, alone on the machine: a trivial node:http server under the same
      // generator at the same rate, then a bare broker at the same rate.
      const rawPort = await freePort();
      const rawHttp = await Role.start(
        'raw-http',
        ['--input-type=module', '-e', RAW_HTTP_SERVER],
        { PORT: String(rawPort) },
        'listening',
      );
      roles.push(rawHttp);
      const rawUrl = `http://127.0.0.1:${rawPort}/orders`;
      say(`raw node:http server at ${o.rate}/s for ${o.rawSeconds} s`);
      const rawLoad = await fixedRateLoad({
        url: rawUrl,
        rate: o.rate,
        durationMs: o.rawSeconds * 1000,
        body: orderBody(o.skus),
      });
      const rawMemory = (await rawHttp.memory()) as Memory;
      say(
        `  ${rawLoad.achieved} req/s, p50 ${rawLoad.latencyMs.p50} ms, p99 ${rawLoad.latencyMs.p99} ms, peak RSS ${rawMemory.peakMb} MB`,
      );
      say(`raw broker latency at ${o.rate}/s for ${o.rawSeconds} s`);
      let rawBroker: RawLatency;
      if (transport === 'rabbitmq') {
        rawBroker = await rawRabbitLatency(amqpUrl, o.rate, o.rawSeconds);
      } else {
        const client = createSqsClient({
          endpoint: sqsEndpoint,
          region: env.AWS_REGION,
          requestTimeoutMs: 25_000,
        });
        rawBroker = await rawSqsLatency(
          client,
          `${name.replace(/_/g, '-')}-raw`,
          o.rate,
          o.rawSeconds,
        ).finally(() => client.destroy());
      }
      say(
        `  confirm p50 ${rawBroker.confirmMs.p50} / p99 ${rawBroker.confirmMs.p99} ms, delivery p50 ${rawBroker.deliverMs.p50} / p99 ${rawBroker.deliverMs.p99} ms`,
      );

      // The pipeline: API, relay and consumer, each a process of its own (npm run dev roles).
      const apiPort = await freePort();
      const dev = (role: string) => [bundle, '--transport', transport, '--role', role];
      const api = await Role.start(
        'api',
        [...dev('api'), '--port', String(apiPort)],
        roleEnv('api'),
        'api:',
      );
      roles.push(api);
      const relay = await Role.start('relay', dev('relay'), roleEnv('relay'), 'relay:');
      roles.push(relay);
      const consumer = await Role.start(
        'consumer',
        dev('consumer'),
        roleEnv('consumer'),
        'consumer:',
      );
      roles.push(consumer);
      const apiUrl = `http://127.0.0.1:${apiPort}/orders`;

      const total = o.warmupSeconds + o.seconds;
      say(
        `pipeline at ${o.rate} orders/s for ${total} s (${o.warmupSeconds} s warm-up, then ${o.seconds} s measured)`,
      );
      const started = Date.now();
      let lastLine = 0;
      const load: FixedRateResult = await fixedRateLoad({
        url: apiUrl,
        rate: o.rate,
        durationMs: total * 1000,
        body: orderBody(o.skus),
        onSecond: (sent, ok) => {
          const s = Math.round((Date.now() - started) / 1000);
          if (s - lastLine < 5) return;
          lastLine = s;
          void Promise.all([backlog(db), relay.memory(), consumer.memory()]).then(
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
        api: (await api.memory()) as Memory,
        relay: (await relay.memory()) as Memory,
        consumer: (await consumer.memory()) as Memory,
      };
      const ok = await drained(db, 120_000);
      const stats = await windowStats(db, new Date(started + o.warmupSeconds * 1000), ended);
      say(
        `  answered ${load.ok}/${load.sent} (failed ${load.failed}, missed ${load.missed}), HTTP p99 ${load.latencyMs.p99} ms; ${stats.throughput} reservations/s, e2e p50 ${stats.e2eMs.p50} / p99 ${stats.e2eMs.p99} ms, outbox lag p50 ${stats.lagMs.p50} / p99 ${stats.lagMs.p99} ms${ok ? '' : ' (NOT DRAINED in 120 s)'}`,
      );
      say(
        `  peak RSS: api ${memory.api.peakMb} MB, relay ${memory.relay.peakMb} MB, consumer ${memory.consumer.peakMb} MB (raw node:http ${rawMemory.peakMb} MB)`,
      );

      const figures: Record<string, BenchFigure> = {};
      const common = {
        transport,
        rate: o.rate,
        seconds: o.seconds,
        warmupSeconds: o.warmupSeconds,
      };
      if (o.report.memory) {
        for (const r of ['relay', 'consumer', 'api'] as const) {
          figures[`memory.${transport}.${r}`] = figure(memory[r].peakMb, 'MB', rawMemory.peakMb, {
            better: 'lower',
            baselineName: `peak RSS of a trivial node:http server after ${o.rawSeconds} s at the same rate`,
            what: `peak RSS (VmHWM) of the ${r} process (npm run dev --role ${r}) after the fixed-rate run`,
            ...common,
          });
        }
      }
      if (!o.report.e2e) return figures;

      // Closed-loop saturation of the raw server and of the API alone (autocannon).
      say(
        `saturation (autocannon, 32 connections, ${o.maxSeconds} s): raw node:http, then the API`,
      );
      const rawMax = await maxThroughput({
        url: rawUrl,
        body: orderBody(o.skus)(0),
        seconds: o.maxSeconds,
        connections: 32,
      });
      const apiMax = await maxThroughput({
        url: apiUrl,
        body: orderBody(o.skus)(0),
        seconds: o.maxSeconds,
        connections: 32,
      });
      say(`  raw node:http ${rawMax.rps} req/s, API ${apiMax.rps} orders/s accepted`);
      await drained(db, 300_000);

      // Step-up search: the highest rate at which the pipeline keeps up.
      const steps: Step[] = [];
      if (o.search) {
        for (let rate = o.search.from; rate <= o.search.max; rate += o.search.step) {
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
            url: apiUrl,
            rate,
            durationMs: o.search.seconds * 1000,
            body: orderBody(o.skus),
          });
          const to = new Date();
          sampling = false;
          await sampler;
          const end = (await backlog(db)).pending;
          const half = samples.filter(([t]) => t >= (o.search?.seconds ?? 0) * 500);
          const slope = round1(slopePerSecond(half));
          const drainedAfter = await drained(db, 120_000);
          const w = await windowStats(db, from, to);
          const expected = Math.round(rate * o.search.seconds);
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
          say(
            `  step ${rate}/s: answered ${r.achieved}/s, backlog slope ${slope}/s, at end ${end}, e2e p99 ${w.e2eMs.p99} ms → ${why ? `not sustainable (${why}${r.errors ? `: ${JSON.stringify(r.errors)}` : ''})` : 'sustainable'}`,
          );
          if (why) break;
        }
      }
      const sustainable = steps.filter((s) => s.sustainable).at(-1)?.rate ?? 0;

      figures[`e2e.${transport}`] = figure(stats.throughput, 'orders/s', rawLoad.achieved, {
        baselineName: `trivial node:http server under the same open-loop generator at ${o.rate}/s`,
        what: 'reservations committed per second during the measured window, at a fixed offered rate',
        offered: o.rate,
        orders: stats.orders,
        reserved: stats.reserved,
        drained: ok,
        http: {
          answered: load.ok,
          failed: load.failed,
          missed: load.missed,
          p50Ms: load.latencyMs.p50,
          p99Ms: load.latencyMs.p99,
          rawP50Ms: rawLoad.latencyMs.p50,
          rawP99Ms: rawLoad.latencyMs.p99,
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
        goalMs: number | undefined,
      ) => {
        figures[`e2e.${transport}.${key}`] = figure(value, 'ms', baseline, {
          better: 'lower',
          baselineName,
          what,
          ...(goalMs !== undefined && transport === 'rabbitmq'
            ? { goal: { on: 'value', max: goalMs } }
            : {}),
          ...common,
        });
      };
      const deliver = `raw broker: publish → consumer receives, one message at a time at ${o.rate}/s, no database`;
      const confirm = `raw broker: publish → confirm, one message at a time at ${o.rate}/s, no database`;
      const e2eWhat =
        'order commit → reservation commit (outbox.occurred_at → reservations.created_at)';
      const lagWhat = 'order commit → broker confirm (outbox.occurred_at → published_at)';
      latency('p50', stats.e2eMs.p50, rawBroker.deliverMs.p50, deliver, e2eWhat, undefined);
      latency('p99', stats.e2eMs.p99, rawBroker.deliverMs.p99, deliver, e2eWhat, 500);
      latency('lag.p50', stats.lagMs.p50, rawBroker.confirmMs.p50, confirm, lagWhat, undefined);
      latency('lag.p99', stats.lagMs.p99, rawBroker.confirmMs.p99, confirm, lagWhat, 250);
      if (o.search) {
        figures[`e2e.${transport}.sustainable`] = figure(sustainable, 'orders/s', rawMax.rps, {
          baselineName: 'trivial node:http server, closed loop (autocannon, 32 connections)',
          what: 'highest step of the step-up search at which the backlog did not grow',
          apiAloneMax: apiMax.rps,
          search: o.search,
          steps,
          transport,
        });
      }
      return figures;
    } finally {
      for (const r of [...roles].reverse()) await r.stop();
      await db.close();
    }
  });
}

/** The end-to-end suite (and the memory figures sampled under its load), per transport. */
export async function benchE2e(env: Env, o: E2eOptions): Promise<Record<string, BenchFigure>> {
  const bundle = await buildDevBundle();
  const figures: Record<string, BenchFigure> = {};
  for (const t of o.transports) Object.assign(figures, await runTransport(env, t, o, bundle));
  return figures;
}
