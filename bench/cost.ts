import { setTimeout as sleep } from 'node:timers/promises';
import {
  type RunningEventSource,
  startAmazonMqEventSource,
  startSchedule,
  startSqsEventSource,
} from '../devkit/lambda/eventSources.js';
import type { LocalDeployment } from '../devkit/lambda/LocalDeployment.js';
import { synthesizedAssembly } from '../devkit/lambda/localPipeline.js';
import { scratchName } from '../devkit/scratch.js';
import type { Env } from '../shared/config/env.js';
import type { SqlExecutor } from '../shared/db/types.js';
import { BROKER_BILLING, type DeployedTransport, deployForBench, ofService } from './deployed.js';
import { countOf } from './environment.js';
import { atMost, offerAtRate, round } from './load.js';
import { PRICES, type PriceId, usd } from './prices.js';
import { progress } from './progress.js';

/** The deployed configurations costed, the stacks as `cdk deploy` creates them: id and label. */
const COSTED: Record<DeployedTransport, { configuration: string; label: string }> = {
  sqs: { configuration: 'sqs-visibility', label: 'SQS stack' },
  rabbitmq: { configuration: 'rabbitmq-amazonmq', label: 'RabbitMQ stack (Amazon MQ trigger)' },
};

export interface CostOptions {
  transports: DeployedTransport[];
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
/** SKUs the orders name (`sku-0` …). */
const SKUS = 100;
const SETTLE_TIMEOUT_MS = 180_000;

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
  transport: DeployedTransport,
): Promise<ConfigurationCost> {
  const { assembly } = await synthesizedAssembly({
    transport,
    ...(o.context ? { context: o.context } : {}),
    log: progress,
  });
  const name = scratchName(`bench_cost_${transport}`);
  const { inventoryDb, vhost, pipeline, closers } = await deployForBench(
    env,
    transport,
    assembly,
    name,
  );
  try {
    const d = pipeline.deployment;
    const api = await d.startHttpApi();
    const schedules = await startTriggers(d, env.AMQP_URL, vhost?.vhost as string, closers);
    // stock and reservations are the inventory service's, in its own database
    await seedStock(inventoryDb);
    const orders = new OrderPlacer(api.url);
    const settle = (expected: number) => settled(d, inventoryDb, transport, expected);

    // warm up (cold starts happen once per environment; a steady state has them amortized)
    const warm = await Promise.all(
      Array.from({ length: MAX_IN_FLIGHT }, (_, i) => orders.place(-1 - i)),
    );
    const warmed = warm.filter((s) => s === 201).length;
    await settle(warmed);

    progress(`  cost on ${transport}: ${o.rate} orders/s for ${o.seconds} s through the HTTP API`);
    const counts = await measureWindow(d, schedules, orders, o, async (placed) => {
      await settle(warmed + placed);
    });
    const result = configurationCost(transport, o, counts);
    progress(
      `  cost on ${transport}: ${result.orders} orders, $${result.usdPerMillionOrders} per million (${result.unpriced.length ? `not priced: ${result.unpriced.join(', ')}` : 'every item priced'})`,
    );
    return result;
  } finally {
    for (const c of closers.reverse()) await c().catch(() => {});
  }
}

/**
 * Every trigger of the template: the event source mappings and the schedule rules (stopped by
 * `closers`). Returns the schedules, whose invocations are billed.
 */
async function startTriggers(
  d: LocalDeployment,
  amqpUrl: string,
  vhost: string,
  closers: (() => Promise<unknown>)[],
): Promise<RunningEventSource[]> {
  const sources: RunningEventSource[] = [];
  closers.push(async () => {
    for (const s of sources) await s.stop();
  });
  for (const s of d.settings.sqs) sources.push(await startSqsEventSource(d, s.function.id));
  for (const s of d.settings.amazonMq) {
    sources.push(await startAmazonMqEventSource(d, s.function.id, { amqpUrl, vhost }));
  }
  const schedules = d.settings.schedules
    .filter((rule) => rule.rateMs !== undefined)
    .flatMap((rule) => rule.targets.map((t) => startSchedule(d, t.id, { immediately: false })));
  closers.push(async () => {
    for (const s of schedules) await s.stop();
  });
  return schedules;
}

/** Stock for the SKUs the orders name, plenty of it. */
async function seedStock(db: SqlExecutor): Promise<void> {
  for (let i = 0; i < SKUS; i++)
    await db.query(
      `INSERT INTO stock (sku, available) VALUES ($1, 1000000) ON CONFLICT (sku) DO NOTHING`,
      [`sku-${i}`],
    );
}

/** Places orders through the HTTP API, counting the requests (each one billed). */
class OrderPlacer {
  requests = 0;

  constructor(private readonly url: string) {}

  /** Order `i`; the response's status. */
  async place(i: number): Promise<number> {
    this.requests++;
    const res = await fetch(`${this.url}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-correlation-id': `cost-${i}` },
      body: JSON.stringify({ sku: `sku-${i % SKUS}`, quantity: 1 }),
    });
    await res.text();
    return res.status;
  }
}

/** Waits for `expected` reservations, then for the invocations still running to end. */
async function settled(
  d: LocalDeployment,
  db: SqlExecutor,
  transport: DeployedTransport,
  expected: number,
): Promise<void> {
  const until = Date.now() + SETTLE_TIMEOUT_MS;
  while ((await countOf(db, 'SELECT count(*)::int AS n FROM reservations')) < expected) {
    if (Date.now() > until) throw new Error(`${transport}: ${expected} reservations not reached`);
    await sleep(200);
  }
  await d.asyncIdle();
}

/** What the measured window counted, every counter from zero at its start. */
interface WindowCounts {
  /** Orders accepted (201). */
  orders: number;
  /** HTTP API requests, whatever their status. */
  requests: number;
  /** Orders offered, per second of the window asked for. */
  offeredPerSecond: number;
  /** From the first order offered until the last reservation and invocation ended. */
  windowSeconds: number;
  /** The functions that ran in the window. */
  functions: { name: string; memorySize: number; invocations: number; billedMs: number }[];
  /** Calls and 64-KiB billing units by `service:operation`, bytes by service. */
  calls: Record<string, number>;
  units64k: Record<string, number>;
  bytes: Record<string, { sent: number; received: number }>;
  scheduleInvocations: number;
}

/**
 * The measured window: every counter from zero, the orders offered at `o.rate` for `o.seconds`,
 * then `settle(orders accepted)`; what was counted.
 */
async function measureWindow(
  d: LocalDeployment,
  schedules: readonly RunningEventSource[],
  orders: OrderPlacer,
  o: CostOptions,
  settle: (placed: number) => Promise<void>,
): Promise<WindowCounts> {
  d.calls.reset();
  orders.requests = 0;
  const fns = d.assembly.functions.filter((f) => f.assetDir).map((f) => d.fn(f.id));
  const before = fns.map((f) => ({ ...f.stats }));
  const schedulesBefore = schedules.map((s) => s.stats.invocations ?? 0);
  const started = Date.now();
  // at most `MAX_IN_FLIGHT` orders in flight (the others wait their turn)
  const place = atMost(MAX_IN_FLIGHT, (i: number) => orders.place(i));
  const { results: statuses } = await offerAtRate(place, o.rate, o.seconds);
  const accepted = statuses.filter((s) => s === 201).length;
  await settle(accepted);
  return {
    orders: accepted,
    requests: orders.requests,
    offeredPerSecond: statuses.length / o.seconds,
    windowSeconds: (Date.now() - started) / 1000,
    functions: fns.map((f, i) => ({
      name: f.spec.name,
      memorySize: f.spec.memorySize,
      invocations: f.stats.invocations - (before[i]?.invocations ?? 0),
      billedMs: f.stats.billedMs - (before[i]?.billedMs ?? 0),
    })),
    calls: d.calls.counts(),
    units64k: d.calls.units64k(),
    bytes: d.calls.bytes(),
    scheduleInvocations: schedules.reduce(
      (a, s, i) => a + (s.stats.invocations ?? 0) - (schedulesBefore[i] ?? 0),
      0,
    ),
  };
}

/** The AWS APIs the functions call, each call billed (from the VPC: through the NAT gateway). */
const API_CALLS: readonly { item: string; price: PriceId; service: string }[] = [
  { item: 'RDS Data API requests', price: 'dataApiRequest', service: 'rds-data' },
  { item: 'Secrets Manager API calls', price: 'secretsManagerCall', service: 'secrets-manager' },
  { item: 'Systems Manager parameter calls', price: 'ssmStandardCall', service: 'ssm' },
  { item: 'Lambda Invoke API calls (the kick)', price: 'lambdaInvokeApi', service: 'lambda' },
];

/**
 * The window's counts as billable items per million orders: those that scale with orders from
 * the counts, the hourly ones over the hours a million orders take at `throughput` per second.
 */
function costLines(transport: DeployedTransport, c: WindowCounts, throughput: number): CostLine[] {
  const perOrder = 1e6 / Math.max(1, c.orders);
  const hours = 1e6 / throughput / 3600;
  const lines: CostLine[] = [];
  // priced from bench/prices.ts: `counted` per order × a million, or as counted (time)
  const add = (item: string, price: PriceId, counted: number, scales: CostLine['scales']) => {
    const perMillion = scales === 'orders' ? counted * perOrder : counted;
    const p = PRICES[price];
    lines.push({
      item,
      price,
      counted: round(counted, 3),
      perMillionOrders: round(perMillion, 3),
      usdPerMillionOrders: p.usd === null ? null : round((perMillion * p.usd) / p.per, 4),
      scales,
    });
  };
  add('API Gateway HTTP API requests', 'httpApiRequest', c.requests, 'orders');
  for (const f of c.functions) {
    if (f.invocations === 0) continue;
    add(`Lambda ${f.name}: invocations`, 'lambdaRequest', f.invocations, 'orders');
    add(
      `Lambda ${f.name}: GB-seconds (${f.memorySize} MB)`,
      'lambdaArmGbSecond',
      (f.billedMs / 1000) * (f.memorySize / 1024),
      'orders',
    );
  }
  // the mappings' own polling (ReceiveMessage, DeleteMessageBatch) goes through the proxy too
  const sqsUnits = ofService(c.units64k, 'sqs');
  if (sqsUnits > 0) add('SQS requests (64 KiB units)', 'sqsStandardRequest', sqsUnits, 'orders');
  for (const a of API_CALLS) add(a.item, a.price, ofService(c.calls, a.service), 'orders');
  // a schedule fires with time, not with orders: its measured rate, over the hours a million take
  add(
    'EventBridge scheduled-rule invocations',
    'eventBridgeScheduledRule',
    (c.scheduleInvocations / c.windowSeconds) * hours * 3600,
    'time',
  );
  if (BROKER_BILLING[transport] === 'broker-hours') {
    add('Amazon MQ broker hours', 'amazonMqBrokerHour', hours, 'time');
    add('NAT gateway hours', 'natGatewayHour', hours, 'time');
    // what the functions in the VPC send to AWS APIs and get back goes through the NAT gateway
    const natBytes = API_CALLS.reduce(
      (n, { service: s }) => n + (c.bytes[s]?.sent ?? 0) + (c.bytes[s]?.received ?? 0),
      0,
    );
    add('NAT gateway data processed (GB)', 'natGatewayGb', natBytes / 1e9, 'orders');
  }
  return lines;
}

/** The configuration's cost: its items, their priced total, and the calls behind them. */
function configurationCost(
  transport: DeployedTransport,
  o: CostOptions,
  c: WindowCounts,
): ConfigurationCost {
  const lines = costLines(transport, c, o.throughput);
  return {
    configuration: COSTED[transport].configuration,
    label: o.label ?? COSTED[transport].label,
    orders: c.orders,
    windowSeconds: round(c.windowSeconds, 3),
    offeredPerSecond: round(c.offeredPerSecond, 3),
    statedThroughput: o.throughput,
    usdPerMillionOrders: round(
      lines.reduce((a, l) => a + (l.usdPerMillionOrders ?? 0), 0),
      2,
    ),
    unpriced: lines.filter((l) => l.usdPerMillionOrders === null).map((l) => l.item),
    lines,
    calls: c.calls,
  };
}

/** The cost table (markdown): one column per configuration, its items as rows. */
export function costMarkdown(costs: ConfigurationCost[]): string[] {
  const items = [...new Set(costs.flatMap((c) => c.lines.map((l) => l.item)))];
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
