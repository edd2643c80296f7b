import { freePort } from '../devkit/freePort.js';
import { type Memory, type NodeProcess, readMemory } from '../devkit/processes.js';
import { type FixedRateResult, fixedRateLoad, maxThroughput } from './load.js';
import { RAW_HTTP_SERVER, startRole } from './processes.js';
import type { RawLatency } from './rawLatency.js';

/**
 * The raw baselines of the end-to-end figures, measured in the same run: a trivial node:http
 * server under the same open-loop generator at the same rate, a bare broker at the same rate
 * (no database), and both servers' closed-loop saturation.
 */
export interface RawBaselines {
  /** The raw server (kept running for the saturation run). */
  rawUrl: string;
  rawLoad: FixedRateResult;
  /** Peak RSS of the raw server after its run. */
  rawMemory: Memory;
  rawBroker: RawLatency;
}

export async function rawBaselines(c: {
  rate: number;
  seconds: number;
  body: (i: number) => string;
  /** The run's bare broker (bench/e2ePipeline.ts, `E2E_BROKERS`). */
  rawLatency: (rate: number, seconds: number) => Promise<RawLatency>;
  started: NodeProcess[];
  say: (line: string) => void;
}): Promise<RawBaselines> {
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
export async function saturation(c: {
  rawUrl: string;
  apiUrl: string;
  body: string;
  seconds: number;
  say: (line: string) => void;
}): Promise<{ rawMax: { rps: number }; apiMax: { rps: number } }> {
  c.say(`saturation (autocannon, 32 connections, ${c.seconds} s): raw node:http, then the API`);
  const rawMax = await maxThroughput({
    url: c.rawUrl,
    body: c.body,
    seconds: c.seconds,
    connections: 32,
  });
  const apiMax = await maxThroughput({
    url: c.apiUrl,
    body: c.body,
    seconds: c.seconds,
    connections: 32,
  });
  c.say(`  raw node:http ${rawMax.rps} req/s, API ${apiMax.rps} orders/s accepted`);
  return { rawMax, apiMax };
}
