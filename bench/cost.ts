import { setTimeout as sleep } from 'node:timers/promises';
import {
  type RunningEventSource,
  startAmazonMqEventSource,
  startSchedule,
  startSqsEventSource,
} from '../devkit/lambda/eventSources.js';
import { synthesizedAssembly } from '../devkit/lambda/localPipeline.js';
import { scratchName } from '../devkit/scratch.js';
import type { Env } from '../shared/config/env.js';
import { deployForBench } from './deployed.js';
import { PRICES, type PriceId } from './prices.js';
import { progress } from './progress.js';

/** The deployed configurations costed: the two stacks as `cdk deploy` creates them. */
export type CostedConfiguration = 'sqs' | 'rabbitmq';

export interface CostOptions {
  transports: CostedConfiguration[];
  /** Orders per second offered through the HTTP API during the measured window. */
  rate: number;
  seconds: number;
  /** Orders per second at which the hourly items (broker, NAT, schedules) are spread. */
  throughput: number;
  /** Pipeline overrides for the synthesized stacks (a before/after of a cost fix). */
  context?: Record<string, string>;
  label?: string;
}

/** One billable item of a configuration, per million orders. */
export interface CostLine {
  item: string;
  price: PriceId;
  /** Counted in the run (calls, invocations, GB-s, GB, hours). */
  counted: number;
  perMillionOrders: number;
  /** null when the price table has no rate for it (reported, not priced). */
  usdPerMillionOrders: number | null;
  /** How the count scales: with orders, or with time (at the stated throughput). */
  scales: 'orders' | 'time';
}

export interface ConfigurationCost {
  configuration: string;
  label: string;
  orders: number;
  windowSeconds: number;
  offeredPerSecond: number;
  statedThroughput: number;
  usdPerMillionOrders: number;
  /** Items counted but not priced (their rate is not in bench/prices.ts). */
  unpriced: string[];
  lines: CostLine[];
  /** Every call the functions and the event source mappings made, by service and operation. */
  calls: Record<string, number>;
}

const MAX_IN_FLIGHT = 8;

/**
 * `npm run bench -- --suite cost`: what a million orders cost on each deployed configuration.
 * The stacks are synthesized and stood up locally (the bundles, wired by the template: the
 * place-order bundle behind the HTTP API, the triggers and schedules as configured), every AWS
 * endpoint behind a counting proxy; orders go through the HTTP API at a steady rate, and every
 * billable call, invocation and GB-second in the window is counted, then priced from
 * bench/prices.ts. Nothing is derived from an assumed call pattern: a count of 0 is a count.
 */
export async function benchCost(env: Env, o: CostOptions): Promise<ConfigurationCost[]> {
  const out: ConfigurationCost[] = [];
  for (const t of o.transports) out.push(await costOf(env, o, t));
  return out;
}

async function costOf(
  env: Env,
  o: CostOptions,
  transport: CostedConfiguration,
): Promise<ConfigurationCost> {
  const { assembly } = await synthesizedAssembly({
    transport,
    ...(o.context ? { context: o.context } : {}),
    log: progress,
  });
  const name = scratchName(`bench_cost_${transport}`);
  const { db, vhost, pipeline, closers } = await deployForBench(env, transport, assembly, name);
  try {
    const d = pipeline.deployment;
    const api = await d.startHttpApi();
    // every trigger of the template: the event source mappings and the schedule rules
    const sources: RunningEventSource[] = [];
    closers.push(async () => {
      for (const s of sources) await s.stop();
    });
    for (const s of d.settings.sqs) sources.push(await startSqsEventSource(d, s.function.id));
    for (const s of d.settings.amazonMq) {
      sources.push(
        await startAmazonMqEventSource(d, s.function.id, {
          amqpUrl: env.AMQP_URL,
          vhost: vhost?.vhost as string,
        }),
      );
    }
    const schedules: RunningEventSource[] = [];
    for (const rule of d.settings.schedules) {
      if (rule.rateMs === undefined) continue;
      for (const target of rule.targets) {
        schedules.push(startSchedule(d, target.id, { immediately: false }));
      }
    }
    closers.push(async () => {
      for (const s of schedules) await s.stop();
    });

    let requests = 0;
    const place = async (i: number): Promise<number> => {
      requests++;
      const res = await fetch(`${api.url}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-correlation-id': `cost-${i}` },
        body: JSON.stringify({ sku: `sku-${i % 100}`, quantity: 1 }),
      });
      await res.text();
      return res.status;
    };
    for (let i = 0; i < 100; i++)
      await db.db.query(
        `INSERT INTO stock (sku, available) VALUES ($1, 1000000) ON CONFLICT (sku) DO NOTHING`,
        [`sku-${i}`],
      );
    const reserved = async () =>
      Number(
        (await db.db.query<{ n: number }>('SELECT count(*)::int AS n FROM reservations')).rows[0]
          ?.n,
      );
    const settle = async (expected: number) => {
      const until = Date.now() + 180_000;
      while ((await reserved()) < expected) {
        if (Date.now() > until)
          throw new Error(`${transport}: ${expected} reservations not reached`);
        await sleep(200);
      }
      await d.asyncIdle();
    };

    // warm up (cold starts happen once per environment; a steady state has them amortized)
    const warm = await Promise.all(Array.from({ length: MAX_IN_FLIGHT }, (_, i) => place(-1 - i)));
    await settle(warm.filter((s) => s === 201).length);

    // the measured window: every counter from zero
    d.calls.reset();
    requests = 0;
    const fns = d.assembly.functions.filter((f) => f.assetDir).map((f) => d.fn(f.id));
    const before = new Map(fns.map((f) => [f.spec.name, { ...f.stats }]));
    const schedulesBefore = schedules.map((s) => s.stats.invocations ?? 0);
    progress(`  cost on ${transport}: ${o.rate} orders/s for ${o.seconds} s through the HTTP API`);
    const started = Date.now();
    const pending: Promise<number>[] = [];
    let inFlight = 0;
    const slots: (() => void)[] = [];
    const total = Math.round(o.rate * o.seconds);
    let sent = 0;
    while (sent < total) {
      const due = Math.min(total, Math.floor(((Date.now() - started) / 1000) * o.rate));
      while (sent < due) {
        const i = sent++;
        pending.push(
          (async () => {
            while (inFlight >= MAX_IN_FLIGHT) await new Promise<void>((r) => slots.push(r));
            inFlight++;
            try {
              return await place(i);
            } finally {
              inFlight--;
              slots.shift()?.();
            }
          })(),
        );
      }
      await sleep(20);
    }
    const statuses = await Promise.all(pending);
    const orders = statuses.filter((s) => s === 201).length;
    await settle(warm.filter((s) => s === 201).length + orders);
    const windowSeconds = (Date.now() - started) / 1000;
    const offered = total / o.seconds;

    const perOrder = 1e6 / Math.max(1, orders);
    // hourly items at the stated throughput: the hours a million orders take
    const hours = 1e6 / o.throughput / 3600;
    const lines: CostLine[] = [];
    const add = (item: string, price: PriceId, counted: number, scales: CostLine['scales']) => {
      const perMillion = scales === 'orders' ? counted * perOrder : counted;
      const p = PRICES[price];
      lines.push({
        item,
        price,
        counted: round(counted),
        perMillionOrders: round(perMillion),
        usdPerMillionOrders: p.usd === null ? null : round((perMillion * p.usd) / p.per, 4),
        scales,
      });
    };
    add('API Gateway HTTP API requests', 'httpApiRequest', requests, 'orders');
    for (const f of fns) {
      const b = before.get(f.spec.name);
      const invocations = f.stats.invocations - (b?.invocations ?? 0);
      const billedMs = f.stats.billedMs - (b?.billedMs ?? 0);
      if (invocations === 0) continue;
      add(`Lambda ${f.spec.name}: invocations`, 'lambdaRequest', invocations, 'orders');
      add(
        `Lambda ${f.spec.name}: GB-seconds (${f.spec.memorySize} MB)`,
        'lambdaArmGbSecond',
        (billedMs / 1000) * (f.spec.memorySize / 1024),
        'orders',
      );
    }
    const calls = d.calls.counts();
    const units = d.calls.units64k();
    const sum = (rec: Record<string, number>, service: string) =>
      Object.entries(rec)
        .filter(([k]) => k.startsWith(`${service}:`))
        .reduce((a, [, n]) => a + n, 0);
    // the mappings' own polling (ReceiveMessage, DeleteMessageBatch) goes through the proxy too
    if (sum(units, 'sqs') > 0)
      add('SQS requests (64 KiB units)', 'sqsStandardRequest', sum(units, 'sqs'), 'orders');
    add('RDS Data API requests', 'dataApiRequest', sum(calls, 'rds-data'), 'orders');
    add('Secrets Manager API calls', 'secretsManagerCall', sum(calls, 'secrets-manager'), 'orders');
    add('Systems Manager parameter calls', 'ssmStandardCall', sum(calls, 'ssm'), 'orders');
    add('Lambda Invoke API calls (the kick)', 'lambdaInvokeApi', sum(calls, 'lambda'), 'orders');
    const ruleInvocations = schedules.reduce(
      (a, s, i) => a + (s.stats.invocations ?? 0) - (schedulesBefore[i] ?? 0),
      0,
    );
    // a schedule fires with time, not with orders: its measured rate, over the hours a million take
    add(
      'EventBridge scheduled-rule invocations',
      'eventBridgeScheduledRule',
      (ruleInvocations / windowSeconds) * hours * 3600,
      'time',
    );
    if (transport === 'rabbitmq') {
      add('Amazon MQ broker hours', 'amazonMqBrokerHour', hours, 'time');
      add('NAT gateway hours', 'natGatewayHour', hours, 'time');
      // what the functions in the VPC send to AWS APIs and get back goes through the NAT gateway
      const bytes = d.calls.bytes();
      const natBytes = ['rds-data', 'secrets-manager', 'ssm', 'lambda'].reduce(
        (a, s) => a + (bytes[s]?.sent ?? 0) + (bytes[s]?.received ?? 0),
        0,
      );
      add('NAT gateway data processed (GB)', 'natGatewayGb', natBytes / 1e9, 'orders');
    }
    const priced = lines.filter((l) => l.usdPerMillionOrders !== null);
    const result: ConfigurationCost = {
      configuration: transport === 'sqs' ? 'sqs-visibility' : 'rabbitmq-amazonmq',
      label: o.label ?? (transport === 'sqs' ? 'SQS stack' : 'RabbitMQ stack (Amazon MQ trigger)'),
      orders,
      windowSeconds: round(windowSeconds),
      offeredPerSecond: round(offered),
      statedThroughput: o.throughput,
      usdPerMillionOrders: round(
        priced.reduce((a, l) => a + (l.usdPerMillionOrders ?? 0), 0),
        2,
      ),
      unpriced: lines.filter((l) => l.usdPerMillionOrders === null).map((l) => l.item),
      lines,
      calls,
    };
    progress(
      `  cost on ${transport}: ${orders} orders, $${result.usdPerMillionOrders} per million (${result.unpriced.length ? `not priced: ${result.unpriced.join(', ')}` : 'every item priced'})`,
    );
    return result;
  } finally {
    for (const c of closers.reverse()) await c().catch(() => {});
  }
}

const round = (n: number, digits = 3) => {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
};

/** The cost table (markdown): one column per configuration, its items as rows. */
export function costMarkdown(costs: ConfigurationCost[]): string[] {
  const items = [...new Set(costs.flatMap((c) => c.lines.map((l) => l.item)))];
  const usd = (n: number | null | undefined) =>
    n === null ? 'not priced' : n === undefined ? '—' : `$${n.toFixed(n < 0.01 && n > 0 ? 4 : 2)}`;
  return [
    `| per million orders | ${costs.map((c) => c.label).join(' | ')} |`,
    `|---|${costs.map(() => '---').join('|')}|`,
    ...items.map(
      (item) =>
        `| ${item} | ${costs
          .map((c) => {
            const l = c.lines.find((x) => x.item === item);
            return l ? `${usd(l.usdPerMillionOrders)} (${fmtCount(l.perMillionOrders)})` : '—';
          })
          .join(' | ')} |`,
    ),
    `| **total (priced items)** | ${costs.map((c) => `**$${c.usdPerMillionOrders.toFixed(2)}**${c.unpriced.length ? ' + unpriced' : ''}`).join(' | ')} |`,
  ];
}

const fmtCount = (n: number) =>
  n >= 1e6
    ? `${(n / 1e6).toFixed(2)} M`
    : n >= 1e3
      ? `${(n / 1e3).toFixed(1)} k`
      : n.toFixed(n < 10 ? 2 : 0);
