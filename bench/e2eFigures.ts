import type { Memory } from '../devkit/processes.js';
import type { DeployedTransport } from './deployed.js';
import type { RawBaselines } from './e2eBaselines.js';
import type { SearchSettings, Step } from './e2eSearch.js';
import type { WindowStats } from './e2eStats.js';
import type { FixedRateResult } from './load.js';
import { type BenchFigure, figure } from './report.js';

/** What every end-to-end figure of a transport carries. */
interface Common {
  transport: DeployedTransport;
  rate: number;
  seconds: number;
  warmupSeconds: number;
}

/** The latency goals (ms) by figure (`p99`, `lag.p99`), per transport: RabbitMQ's. */
const LATENCY_GOALS_MS: Record<DeployedTransport, Partial<Record<string, number>>> = {
  rabbitmq: { p99: 500, 'lag.p99': 250 },
  sqs: {},
};

/** Peak RSS of each role after the fixed-rate run, beside the raw server's. */
export function memoryFigures(
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
export function pipelineFigures(c: {
  common: Common;
  stats: WindowStats;
  load: FixedRateResult;
  drained: boolean;
  raw: RawBaselines;
  saturation: { rawMax: { rps: number }; apiMax: { rps: number } };
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
