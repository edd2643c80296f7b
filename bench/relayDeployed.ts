import { setTimeout as sleep } from 'node:timers/promises';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { startSchedule } from '../devkit/lambda/eventSources.js';
import type { LambdaFunction } from '../devkit/lambda/LambdaFunction.js';
import { type LocalPipeline, synthesizedAssembly } from '../devkit/lambda/localPipeline.js';
import { scratchName } from '../devkit/scratch.js';
import type { Env } from '../shared/config/env.js';
import { OrderService } from '../shared/orders/OrderService.js';
import { LambdaOutboxKick, noKick, type OutboxKick } from '../shared/outbox/kick.js';
import { BROKER_BILLING, type DeployedTransport, deployForBench, ofService } from './deployed.js';
import { countOf } from './environment.js';
import { atMost, offerAtRate } from './load.js';
import { progress } from './progress.js';
import { type BenchFigure, figure } from './report.js';

export type RelayDesign = 'kick' | 'schedule-drain';

export interface RelayDeployedOptions {
  transport: DeployedTransport;
  /** Offered orders per second in the burst, and its length. */
  rate: number;
  burstSeconds: number;
  /** Orders one minute apart. */
  sparseOrders: number;
  sparseGapMs: number;
  /** Minutes with no traffic measured per design (the kick design needs ≥ 61 for its hourly sweep). */
  idleMinutes: Record<RelayDesign, number>;
}

export interface DesignRun {
  design: RelayDesign;
  burst: { orders: number; offeredPerSecond: number; p50Ms: number; p99Ms: number; maxMs: number };
  sparse: { lagsMs: number[]; p50Ms: number; maxMs: number };
  idle: IdleCounts;
}

export interface IdleCounts {
  windowMinutes: number;
  /** Requests the functions sent during the window, by `service:operation`. */
  calls: Record<string, number>;
  dataApiCalls: number;
  sqsRequests: number;
  ssmCalls: number;
  relayInvocations: number;
  relayGbSeconds: number;
  /** Minutes from the end of the last order's kicked run to the next database call (none: the window). */
  minutesWithoutDbCall: number;
  perHour: {
    dataApiCalls: number;
    sqsRequests: number;
    relayInvocations: number;
    relayGbSeconds: number;
  };
}

/**
 * The relay as AWS runs it: the synthesized bundles of place-order and the relay in Lambda-shaped
 * processes, the relay on its 1-minute schedule rule, kicked (design `kick`) through the local
 * Lambda Invoke endpoint with the template's reserved concurrency and EventInvokeConfig, its state
 * in SSM (moto), every AWS call counted at a proxy in front of the endpoints. The baseline
 * (`schedule-drain`) is the design it replaces, deployed from the same bundles with the settings
 * that reproduce it: no kick, every tick sweeps and drains for the whole 50 s budget.
 *
 * Per design: the commit-to-published lag (`published_at − occurred_at`, both on the database's
 * clock) of a burst at `rate` orders/s and of orders one minute apart, then a window with no
 * traffic in which the Data API calls, SQS requests, relay invocations and their GB-seconds are
 * counted.
 */
export async function benchRelayDeployed(
  env: Env,
  o: RelayDeployedOptions,
): Promise<{ figures: Record<string, BenchFigure>; runs: DesignRun[] }> {
  const runs: DesignRun[] = [];
  for (const design of ['schedule-drain', 'kick'] as const) {
    runs.push(await runDesign(env, o, design));
  }
  const [old, ours] = runs as [DesignRun, DesignRun];
  const t = o.transport;
  // what the deployment does per hour at rest, ours beside the baseline's: lower is better
  const perHour = (key: keyof IdleCounts['perHour'], unit: string, extra = {}) =>
    figure(ours.idle.perHour[key], unit, old.idle.perHour[key], { better: 'lower', ...extra });
  const figures: Record<string, BenchFigure> = {
    [`relay-deployed.${t}.lag-p99-at-${o.rate}`]: figure(ours.burst.p99Ms, 'ms', old.burst.p99Ms, {
      better: 'lower',
      goal: { on: 'value', max: 1_000 },
      p50: ours.burst.p50Ms,
      baselineP50: old.burst.p50Ms,
      baselineNote: 'the 1-minute schedule draining 50 s of each minute, no kick',
    }),
    [`relay-deployed.${t}.lag-max-1-per-min`]: figure(ours.sparse.maxMs, 'ms', old.sparse.maxMs, {
      better: 'lower',
      lags: ours.sparse.lagsMs,
      baselineLags: old.sparse.lagsMs,
    }),
    [`relay-deployed.${t}.idle-data-api-calls-per-hour`]: perHour('dataApiCalls', 'calls/h', {
      windowMinutes: ours.idle.windowMinutes,
    }),
    [`relay-deployed.${t}.idle-relay-gb-s-per-hour`]: perHour('relayGbSeconds', 'GB-s/h', {
      invocationsPerHour: ours.idle.perHour.relayInvocations,
    }),
    [`relay-deployed.${t}.idle-minutes-without-db-call`]: figure(
      ours.idle.minutesWithoutDbCall,
      'min',
      old.idle.minutesWithoutDbCall,
      { goal: { on: 'value', min: 10 } },
    ),
  };
  if (BROKER_BILLING[t] === 'requests') {
    figures[`relay-deployed.${t}.idle-sqs-requests-per-hour`] = perHour(
      'sqsRequests',
      'requests/h',
    );
  }
  return { figures, runs };
}

/** Stand-ins for place-order containers in the burst, each with its own kick interval. */
const PRODUCERS = 5;
/** Invocations of place-order in flight at once (its environments). */
const MAX_IN_FLIGHT = 8;

const pct = (sorted: number[], p: number) =>
  sorted.length
    ? (sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number)
    : 0;

async function runDesign(
  env: Env,
  o: RelayDeployedOptions,
  design: RelayDesign,
): Promise<DesignRun> {
  const relayOverrides =
    design === 'kick' ? {} : { kick: false, lingerMs: 50_000, sweepQuietMs: 0, sweepIntervalMs: 0 };
  const { assembly } = await synthesizedAssembly({
    transport: o.transport,
    context: { pipeline: JSON.stringify({ relay: relayOverrides }) },
    log: progress,
  });
  const name = scratchName(`bench_relay_${design.replace('-', '_')}`);
  const { db, pipeline, closers } = await deployForBench(env, o.transport, assembly, name);
  try {
    const d = pipeline.deployment;
    const api = await d.startHttpApi();
    const relay = d.fn('outbox-relay');
    const schedule = startSchedule(d, 'outbox-relay', { immediately: false });
    closers.push(() => schedule.stop());
    const agent = { keepalive: true } as const;
    let failures = 0;
    // at most `MAX_IN_FLIGHT` requests at once: each is an invocation, and each invocation in flight is
    // an execution environment (a process) of its own, as in Lambda; the machine has two cores
    const place = atMost(MAX_IN_FLIGHT, async (i: number) => {
      const res = await fetch(`${api.url}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-correlation-id': `bench-${i}` },
        body: JSON.stringify({ sku: `sku-${i % 100}`, quantity: 1 }),
        ...agent,
      });
      const body = await res.text();
      if (res.status !== 201 && failures++ < 3)
        progress(`  place-order answered ${res.status}: ${body.slice(0, 300)}`);
      return res.status;
    });
    const unpublished = () =>
      countOf(db.db, 'SELECT count(*) AS n FROM outbox WHERE published_at IS NULL');
    const waitPublished = async (timeoutMs: number) => {
      const until = Date.now() + timeoutMs;
      while ((await unpublished()) > 0) {
        if (Date.now() > until)
          throw new Error(`${design}: rows still unpublished after ${timeoutMs} ms`);
        await sleep(100);
      }
    };
    // warm the place-order environments (cold starts are not the relay's lag)
    await Promise.all(Array.from({ length: MAX_IN_FLIGHT }, (_, i) => place(-1 - i)));
    await waitPublished(120_000);
    await db.db.query('DELETE FROM outbox');

    // 1. the burst, open loop: `rate` orders/s in ticks of 20 ms, written by PRODUCERS stand-ins
    // for place-order containers: the order service and the kick place-order's bundle runs (its
    // interval, through Lambda's Invoke on the local endpoint), in this process, because the
    // emulated API path tops out near 50 orders/s on two cores. The relay is the bundle.
    const placeEnv = d.assembly.function('place-order').environment;
    const kicks = placeEnv.RELAY_FUNCTION_NAME !== undefined;
    const lambda = new LambdaClient({
      region: d.region,
      endpoint: d.platformEnv.AWS_ENDPOINT_URL_LAMBDA,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    closers.push(async () => lambda.destroy());
    const orders = new OrderService({ db: db.db });
    const producers = Array.from({ length: PRODUCERS }, (_, i) =>
      kicks
        ? new LambdaOutboxKick(
            { client: lambda },
            {
              functionName: 'outbox-relay',
              from: `place-order#${i}`,
              minIntervalMs: Number(placeEnv.RELAY_KICK_INTERVAL_MS),
            },
          )
        : noKick,
    );
    const produce = async (i: number) => {
      await orders.place({ sku: `sku-${i % 100}`, quantity: 1, correlationId: `bench-${i}` });
      await (producers[i % PRODUCERS] as OutboxKick).kick();
      return 201;
    };
    progress(
      `  ${design}: ${o.rate} orders/s for ${o.burstSeconds} s (${PRODUCERS} producers${kicks ? ', kicking' : ''})`,
    );
    const sent = await offerAtRate(produce, o.rate, o.burstSeconds);
    const statuses = sent.results;
    const accepted = statuses.filter((s) => s === 201).length;
    await waitPublished(180_000);
    const lags = (
      await db.db.query<{ ms: number }>(
        'SELECT extract(epoch FROM published_at - occurred_at) * 1000 AS ms FROM outbox ORDER BY 1',
      )
    ).rows.map((r) => Number(r.ms));
    const burst = {
      orders: accepted,
      offeredPerSecond: Math.round(statuses.length / sent.sendSeconds),
      p50Ms: Math.round(pct(lags, 0.5)),
      p99Ms: Math.round(pct(lags, 0.99)),
      maxMs: Math.round(lags.at(-1) ?? 0),
    };
    progress(`  ${design}: burst ${JSON.stringify(burst)}`);
    await db.db.query('DELETE FROM outbox');

    // 2. one order a minute
    const sparseLags: number[] = [];
    for (let i = 0; i < o.sparseOrders; i++) {
      await sleep(o.sparseGapMs);
      await place(1_000_000 + i);
      await waitPublished(120_000);
      const row = await db.db.query<{ ms: number }>(
        'SELECT extract(epoch FROM published_at - occurred_at) * 1000 AS ms FROM outbox ORDER BY occurred_at DESC LIMIT 1',
      );
      sparseLags.push(Math.round(Number(row.rows[0]?.ms)));
      progress(
        `  ${design}: order ${i + 1}/${o.sparseOrders} one minute apart: ${sparseLags.at(-1)} ms`,
      );
    }
    const sortedSparse = [...sparseLags].sort((a, b) => a - b);
    // the kicked run of the last order lingers, then ends: the rest starts there
    await d.asyncIdle();
    const lastOrderPublishedAt = Date.now();

    // 3. no traffic: what the deployment costs at rest
    const windowMinutes = o.idleMinutes[design];
    progress(`  ${design}: ${windowMinutes} min with no traffic`);
    d.calls.reset();
    const before = { ...relay.stats };
    await sleep(windowMinutes * 60_000);
    const idle = idleCounts(d.calls, relay, before, windowMinutes, lastOrderPublishedAt);
    progress(`  ${design}: at rest ${JSON.stringify(idle)}`);
    return {
      design,
      burst,
      sparse: {
        lagsMs: sparseLags,
        p50Ms: pct(sortedSparse, 0.5),
        maxMs: sortedSparse.at(-1) ?? 0,
      },
      idle,
    };
  } finally {
    for (const c of closers.reverse()) await c().catch(() => {});
  }
}

function idleCounts(
  calls: LocalPipeline['deployment']['calls'],
  relay: LambdaFunction,
  before: LambdaFunction['stats'],
  windowMinutes: number,
  since: number,
): IdleCounts {
  const counts = calls.counts();
  const sum = (service: string) => ofService(counts, service);
  const invocations = relay.stats.invocations - before.invocations;
  const gbSeconds =
    ((relay.stats.billedMs - before.billedMs) / 1000) * (relay.spec.memorySize / 1024);
  const firstDb = calls.times('rds-data')[0];
  // none in the window: at least the window
  const minutesWithoutDbCall = ((firstDb ?? Date.now()) - since) / 60_000;
  const perHour = (n: number) => Math.round(((n * 60) / windowMinutes) * 1000) / 1000;
  return {
    windowMinutes,
    calls: counts,
    dataApiCalls: sum('rds-data'),
    sqsRequests: sum('sqs'),
    ssmCalls: sum('ssm'),
    relayInvocations: invocations,
    relayGbSeconds: Math.round(gbSeconds * 1000) / 1000,
    minutesWithoutDbCall: Math.round(minutesWithoutDbCall * 10) / 10,
    perHour: {
      dataApiCalls: perHour(sum('rds-data')),
      sqsRequests: perHour(sum('sqs')),
      relayInvocations: perHour(invocations),
      relayGbSeconds: perHour(gbSeconds),
    },
  };
}
