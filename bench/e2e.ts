import { type Memory, type NodeProcess, readMemory } from '../devkit/processes.js';
import type { Env } from '../shared/config/env.js';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { setStock } from '../shared/inventory/stock.js';
import type { DeployedTransport } from './deployed.js';
import { rawBaselines, saturation } from './e2eBaselines.js';
import { memoryFigures, pipelineFigures } from './e2eFigures.js';
import { E2E_BROKERS, type Pipeline, roleEnvironment, startPipeline } from './e2ePipeline.js';
import { type SearchSettings, stepUpSearch } from './e2eSearch.js';
import { backlog, drained, windowStats } from './e2eStats.js';
import { withBenchEnvironment } from './environment.js';
import { type FixedRateResult, fixedRateLoad } from './load.js';
import { buildDevBundle, ROLE_STOP_GRACE_MS } from './processes.js';
import { progress } from './progress.js';
import type { BenchFigure } from './report.js';

/**
 * The end-to-end benchmark, per transport: raw baselines first, alone on the machine
 * (bench/e2eBaselines.ts); then the pipeline's processes (bench/e2ePipeline.ts) under a fixed
 * offered rate, measured from the database's own timestamps (bench/e2eStats.ts); the closed-loop
 * saturation; the step-up search of the sustainable rate (bench/e2eSearch.ts); the figures
 * (bench/e2eFigures.ts).
 */

export interface E2eOptions {
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
          DATABASE_URL: scratch.database.url,
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
        const pipeline = await startPipeline({
          bundle,
          transport,
          roleEnv: roleEnvironment(childEnv, transport, o),
          started,
        });
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
  pipeline: Pipeline,
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
