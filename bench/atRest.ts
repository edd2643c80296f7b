import { randomUUID } from 'node:crypto';
import type { DeployedAssembly } from '../devkit/lambda/assembly.js';
import { readAssembly } from '../devkit/lambda/assembly.js';
import { deployedSettings, type ScheduleRule } from '../devkit/lambda/deployedSettings.js';
import type { LambdaFunction } from '../devkit/lambda/LambdaFunction.js';
import type { LocalDeployment } from '../devkit/lambda/LocalDeployment.js';
import { synthesizedAssembly } from '../devkit/lambda/localPipeline.js';
import { templatesFor } from '../devkit/lambda/synth.js';
import { scratchName } from '../devkit/scratch.js';
import { scheduledEvent } from '../devkit/triggers/scheduleTrigger.js';
import type { Env } from '../shared/config/env.js';
import { BROKER_BILLING, type DeployedTransport, deployForBench, ofService } from './deployed.js';
import { round } from './load.js';
import { PRICES, type PriceId, usd } from './prices.js';
import { progress } from './progress.js';

/**
 * What a deployment costs in a month with no orders at all: the fixed charges of the resources
 * the synthesized templates create (counted from the templates), and the usage of the functions
 * that run anyway (the relay's 1-minute tick and hourly sweep, the daily maintenance), measured
 * once on the deployed bundles and multiplied by the schedules the templates set. Priced from
 * bench/prices.ts; a rate the table lacks stays unpriced. Aurora's compute is an estimate (Aurora
 * does not run here), and so is each line marked `estimate`: the table says what it assumes.
 */

/** AWS prices a month as 730 hours. */
export const HOURS_PER_MONTH = 730;
const MONTH_MS = HOURS_PER_MONTH * 3_600_000;

/** The configurations costed at rest: the stacks `cdk deploy` creates with these settings. */
export const AT_REST_CONFIGURATIONS = [
  { id: 'sqs', label: 'SQS stack', transport: 'sqs', context: {} },
  { id: 'rabbitmq', label: 'RabbitMQ stack (mq.m7g.medium)', transport: 'rabbitmq', context: {} },
  {
    id: 'rabbitmq-production',
    label: 'RabbitMQ, `-c broker=production` (3 × mq.m7g.large)',
    transport: 'rabbitmq',
    context: { broker: 'production' },
  },
] as const satisfies readonly {
  id: string;
  label: string;
  transport: DeployedTransport;
  context: Record<string, string>;
}[];

export type AtRestConfigurationId = (typeof AT_REST_CONFIGURATIONS)[number]['id'];

/** Instances a broker deployment mode runs (Amazon MQ DG, broker architecture). */
const BROKER_INSTANCES: Record<string, number> = {
  SINGLE_INSTANCE: 1,
  ACTIVE_STANDBY_MULTI_AZ: 2,
  CLUSTER_MULTI_AZ: 3,
};
const BROKER_PRICES: Record<string, PriceId> = {
  'mq.m7g.medium': 'amazonMqBrokerHour',
  'mq.m7g.large': 'amazonMqM7gLargeHour',
};

/** Aurora's default `SecondsUntilAutoPause` (docs/aws-facts.md, Aurora auto-pause). */
const DEFAULT_AUTO_PAUSE_SECONDS = 300;

/** The billable resources of a deployment's templates (all its stacks). */
export interface TemplateCounts {
  secrets: number;
  kmsKeys: number;
  alarms: number;
  /** The metrics the standard-resolution alarms evaluate (a metric-math alarm: each metric it reads). */
  alarmMetrics: number;
  /** Alarms with a period under 60 s (high resolution: another rate, not in the table). */
  highResolutionAlarms: number;
  natGateways: number;
  /** Elastic IPs (the NAT gateway's): public IPv4 addresses. */
  elasticIps: number;
  brokers: { instanceType: string; deploymentMode: string; instances: number }[];
  /** VPC flow logs, and whether each VPC has functions in it. */
  flowLogs: { stack: string; functionsInVpc: number }[];
  aurora: { backupRetentionDays: number; minAcu: number; secondsUntilAutoPause: number }[];
  sqsEventSourceMappings: number;
  relay: { tickRateMs: number; sweepIntervalMs: number; memoryMb: number; inVpc: boolean };
  maintenance: { rateMs: number; memoryMb: number };
}

type Props = Record<string, unknown>;

/** Counts what the templates bill for at rest. Throws when a deployment lacks the relay or maintenance. */
export function countTemplates(assembly: DeployedAssembly): TemplateCounts {
  const props = (type: string) =>
    assembly.resources(type).map((r) => (r.resource.Properties ?? {}) as Props);
  const alarms = props('AWS::CloudWatch::Alarm');
  const metricsOf = (a: Props) => {
    const math = a.Metrics as { MetricStat?: unknown }[] | undefined;
    return math ? math.filter((m) => m.MetricStat !== undefined).length : 1;
  };
  const periodOf = (a: Props) => {
    const math = a.Metrics as { MetricStat?: { Period?: number } }[] | undefined;
    return Number(a.Period ?? Math.min(...(math ?? []).map((m) => m.MetricStat?.Period ?? 60)));
  };
  const highRes = alarms.filter((a) => periodOf(a) < 60);
  const settings = deployedSettings(assembly);
  const ruleOf = (id: string): ScheduleRule => {
    const rule = settings.schedules.find((s) => s.targets.some((t) => t.id === id));
    if (rule?.rateMs === undefined) throw new Error(`no rate schedule targets ${id}`);
    return rule;
  };
  const relay = assembly.function('outbox-relay');
  const maintenance = assembly.function('maintenance');
  const inVpc = (stack: string) =>
    assembly.functions.filter(
      (f) => f.stack.stackName === stack && f.resource.Properties?.VpcConfig !== undefined,
    ).length;
  return {
    secrets: props('AWS::SecretsManager::Secret').length,
    kmsKeys: props('AWS::KMS::Key').length,
    alarms: alarms.length,
    alarmMetrics: alarms.filter((a) => periodOf(a) >= 60).reduce((n, a) => n + metricsOf(a), 0),
    highResolutionAlarms: highRes.length,
    natGateways: props('AWS::EC2::NatGateway').length,
    elasticIps: props('AWS::EC2::EIP').length,
    brokers: props('AWS::AmazonMQ::Broker').map((b) => ({
      instanceType: String(b.HostInstanceType),
      deploymentMode: String(b.DeploymentMode),
      instances: BROKER_INSTANCES[String(b.DeploymentMode)] ?? Number.NaN,
    })),
    flowLogs: assembly.resources('AWS::EC2::FlowLog').map((r) => ({
      stack: r.stack.stackName,
      functionsInVpc: inVpc(r.stack.stackName),
    })),
    aurora: props('AWS::RDS::DBCluster').map((c) => {
      const scaling = (c.ServerlessV2ScalingConfiguration ?? {}) as Props;
      return {
        backupRetentionDays: Number(c.BackupRetentionPeriod ?? 1),
        minAcu: Number(scaling.MinCapacity ?? 0.5),
        secondsUntilAutoPause: Number(scaling.SecondsUntilAutoPause ?? DEFAULT_AUTO_PAUSE_SECONDS),
      };
    }),
    sqsEventSourceMappings: settings.sqs.length,
    relay: {
      tickRateMs: ruleOf('outbox-relay').rateMs as number,
      sweepIntervalMs: Number(relay.environment.RELAY_SWEEP_INTERVAL_MS),
      memoryMb: relay.memorySize,
      inVpc: relay.resource.Properties?.VpcConfig !== undefined,
    },
    maintenance: {
      rateMs: ruleOf('maintenance').rateMs as number,
      memoryMb: maintenance.memorySize,
    },
  };
}

/** One invocation kind at rest, as measured on the deployed bundle (means per invocation). */
export interface InvocationAtRest {
  measured: number;
  billedMs: number;
  /** AWS requests by `service:operation`. */
  calls: Record<string, number>;
  /** SQS requests in 64 KiB units. */
  sqsUnits: number;
  /** Bytes sent and received to AWS APIs from inside the VPC (through the NAT gateway). */
  natBytes: number;
  /** What it writes to its log group: its own lines and Lambda's START, END and REPORT lines. */
  logBytes: number;
  /** The custom metric series it publishes (CloudWatch EMF): `namespace metric {dimensions}`. */
  series: string[];
}

/** The functions that run with no orders, measured on one transport's deployed bundles. */
export interface AtRestUsage {
  transport: DeployedTransport;
  measuredAt: string;
  /** The relay's tick that reads the outboxes (due once an hour). */
  sweep: InvocationAtRest;
  /** The relay's other ticks (heartbeat; on RabbitMQ the queue depths from the broker). */
  tick: InvocationAtRest;
  /** The daily maintenance run (cold: its environment does not live a day). */
  maintenance: InvocationAtRest;
}

/** The custom metric series of CloudWatch EMF lines: each metric of each dimension set. */
export function emfSeries(lines: readonly string[]): string[] {
  const out = new Set<string>();
  for (const line of lines) {
    if (!line.includes('"_aws"')) continue;
    let doc: Record<string, unknown>;
    try {
      doc = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue;
    }
    const directives = (doc._aws as { CloudWatchMetrics?: unknown[] } | undefined)
      ?.CloudWatchMetrics as
      | { Namespace: string; Dimensions: string[][]; Metrics: { Name: string }[] }[]
      | undefined;
    for (const d of directives ?? []) {
      for (const set of d.Dimensions.length ? d.Dimensions : [[]]) {
        const dims = set.map((k) => `${k}=${String(doc[k])}`).join(',');
        for (const m of d.Metrics) out.add(`${d.Namespace} ${m.Name} {${dims}}`);
      }
    }
  }
  return [...out].sort();
}

/**
 * Lambda's own lines per invocation in a text-format log group (Lambda DG, function logs):
 * START, END and REPORT, with a request id and the durations (an init duration on cold starts).
 */
export function platformLogBytes(durationMs: number, memoryMb: number, initMs?: number): number {
  const id = randomUUID();
  const lines = [
    `START RequestId: ${id} Version: $LATEST`,
    `END RequestId: ${id}`,
    `REPORT RequestId: ${id}\tDuration: ${durationMs.toFixed(2)} ms\tBilled Duration: ${Math.ceil(durationMs)} ms\tMemory Size: ${memoryMb} MB\tMax Memory Used: ${memoryMb} MB\t${initMs !== undefined ? `Init Duration: ${initMs.toFixed(2)} ms\t` : ''}`,
  ];
  return lines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0);
}

const NAT_SERVICES = ['rds-data', 'secrets-manager', 'ssm', 'lambda', 'sqs'];

/**
 * Stands one transport's synthesized stacks up locally (bench/deployed.ts) and measures, with no
 * orders: a sweep (the relay's state says the last look was an hour ago), three plain ticks and a
 * maintenance run, each invoked as its schedule rule invokes it, every AWS request counted and
 * every log line kept. A first tick before them warms the relay up (it sweeps: no state yet).
 */
export async function measureAtRest(env: Env, transport: DeployedTransport): Promise<AtRestUsage> {
  const { assembly } = await synthesizedAssembly({ transport, log: progress });
  const lines = new Map<string, string[]>();
  const name = scratchName(`bench_rest_${transport}`);
  const { pipeline, closers } = await deployForBench(env, transport, assembly, name, {
    onLog: (fn, line) => lines.set(fn, [...(lines.get(fn) ?? []), line]),
  });
  try {
    const d = pipeline.deployment;
    const counts = countTemplates(assembly);
    const relay = d.fn('outbox-relay');
    const maintenance = d.fn('maintenance');
    const tickOf = (id: string) => {
      const rule = d.settings.schedules.find((s) => s.targets.some((t) => t.id === id));
      if (!rule) throw new Error(`no schedule for ${id}`);
      const ruleArn = String(
        d.resolve(rule.stack, { 'Fn::GetAtt': [rule.logicalId, 'Arn'] }, rule.logicalId),
      );
      return () => scheduledEvent({ ruleArn, region: d.region });
    };
    const relayTick = tickOf('outbox-relay');
    progress(`  at rest on ${transport}: a sweep, three ticks and a maintenance run`);
    const warm = await invokeMeasured(d, relay, relayTick(), lines, false);
    if (warm.mode !== 'sweep') throw new Error(`the first tick did not sweep (${warm.mode})`);
    const anHourAgo = Date.now() - 61 * 60_000;
    await d.setParameter(
      'RelayState',
      JSON.stringify({ lastCheckAt: anHourAgo, lastActivityAt: anHourAgo, pending: false }),
    );
    const sweep = await invokeMeasured(d, relay, relayTick(), lines, counts.relay.inVpc);
    if (sweep.mode !== 'sweep') throw new Error(`a due sweep ran as ${sweep.mode}`);
    const ticks: InvocationAtRest[] = [];
    for (let i = 0; i < 3; i++) {
      const t = await invokeMeasured(d, relay, relayTick(), lines, counts.relay.inVpc);
      if (t.mode !== 'tick') throw new Error(`a tick ran as ${t.mode}`);
      ticks.push(t.usage);
    }
    const maint = await invokeMeasured(d, maintenance, tickOf('maintenance')(), lines, false);
    return {
      transport,
      measuredAt: new Date().toISOString(),
      sweep: sweep.usage,
      tick: meanOf(ticks),
      maintenance: maint.usage,
    };
  } finally {
    for (const c of closers.reverse()) await c().catch(() => {});
  }
}

async function invokeMeasured(
  d: LocalDeployment,
  fn: LambdaFunction,
  event: unknown,
  lines: Map<string, string[]>,
  throughNat: boolean,
): Promise<{ mode: string | undefined; usage: InvocationAtRest }> {
  const logged = lines.get(fn.spec.name)?.length ?? 0;
  const billedBefore = fn.stats.billedMs;
  d.calls.reset();
  const out = await fn.invoke(event);
  if (!out.ok)
    throw new Error(`${fn.spec.name}: ${out.error.errorType}: ${out.error.errorMessage}`);
  await d.asyncIdle();
  const own = (lines.get(fn.spec.name) ?? []).slice(logged);
  const calls = d.calls.counts();
  const units = d.calls.units64k();
  const bytes = d.calls.bytes();
  const billedMs = fn.stats.billedMs - billedBefore;
  return {
    mode: (out.payload as { mode?: string } | undefined)?.mode,
    usage: {
      measured: 1,
      billedMs,
      calls,
      sqsUnits: ofService(units, 'sqs'),
      natBytes: throughNat
        ? NAT_SERVICES.reduce((n, s) => n + (bytes[s]?.sent ?? 0) + (bytes[s]?.received ?? 0), 0)
        : 0,
      logBytes:
        own.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0) +
        platformLogBytes(out.durationMs, fn.spec.memorySize, out.initMs),
      series: emfSeries(own),
    },
  };
}

function meanOf(runs: InvocationAtRest[]): InvocationAtRest {
  const n = runs.length;
  const mean = (f: (r: InvocationAtRest) => number) => runs.reduce((a, r) => a + f(r), 0) / n;
  const calls: Record<string, number> = {};
  for (const r of runs)
    for (const [k, v] of Object.entries(r.calls)) calls[k] = (calls[k] ?? 0) + v / n;
  return {
    measured: n,
    billedMs: mean((r) => r.billedMs),
    calls,
    sqsUnits: mean((r) => r.sqsUnits),
    natBytes: mean((r) => r.natBytes),
    logBytes: mean((r) => r.logBytes),
    series: [...new Set(runs.flatMap((r) => r.series))].sort(),
  };
}

/** Where a line's count comes from. */
export type AtRestBasis = 'template' | 'measured' | 'estimate' | 'not counted';

/** One billable item of a month at rest. */
export interface AtRestLine {
  item: string;
  /** The count in the rate's unit (hours, GB, requests, metric-months…); null: not counted. */
  count: number | null;
  /** How the count reads in the table (`6 secrets`, `730 h`). */
  countText: string;
  price: PriceId | null;
  usdPerMonth: number | null;
  basis: AtRestBasis;
  /** Where the count comes from, or what the estimate assumes. */
  how: string;
}

export interface AtRestMonth {
  configuration: AtRestConfigurationId;
  label: string;
  counts: TemplateCounts;
  lines: AtRestLine[];
  /** Priced lines (estimates included). */
  usdPerMonth: number;
  /** Of which estimates. */
  estimatedUsd: number;
  unpriced: string[];
}

/**
 * What the estimates assume (Aurora does not run here, and no VPC carries traffic here):
 * - Aurora runs at 0.5 ACU while awake (its lowest capacity once resumed) and a resume takes
 *   15 s ("a few seconds": docs/aws-facts.md, **Assumed**); it then stays awake for the work and
 *   `SecondsUntilAutoPause` before pausing again;
 * - the cluster volume holds 1 GB (the schema and a quiet pipeline's retained rows);
 * - VPC flow logs: at most 50 records a minute of about 150 bytes in a VPC with functions in it
 *   (the relay's per-minute connections through the NAT gateway and to the broker, the event
 *   source's pollers), none where nothing in the VPC talks at rest (the data stack's: the cluster
 *   is paused and the functions reach it over the Data API).
 */
export const AT_REST_ASSUMPTIONS = {
  awakeAcu: 0.5,
  resumeSeconds: 15,
  volumeGb: 1,
  flowRecordsPerMinute: 50,
  flowRecordBytes: 150,
} as const;

const usdOf = (price: PriceId, count: number): number | null => {
  const p = PRICES[price];
  return p.usd === null ? null : (count * p.usd) / p.per;
};
const n0 = (n: number) => Math.round(n).toLocaleString('en-US');
const n2 = (n: number) => (n >= 100 ? n0(n) : String(round(n, n < 1 ? 3 : 2)));

/**
 * The month at rest of one configuration: its template lines, and with `usage` (the same
 * transport's measurement) the usage, metrics, logs and estimates.
 */
export function monthAtRest(
  configuration: (typeof AT_REST_CONFIGURATIONS)[number],
  counts: TemplateCounts,
  usage?: AtRestUsage,
): AtRestMonth {
  const lines: AtRestLine[] = [];
  const add: AddLine = (item, count, price, basis, how, countText = n0(count ?? 0)) => {
    lines.push({
      item,
      count,
      countText,
      price,
      usdPerMonth: count === 0 ? 0 : count === null || price === null ? null : usdOf(price, count),
      basis,
      how,
    });
  };
  add(
    'Secrets Manager secrets',
    counts.secrets,
    'secretsManagerSecretMonth',
    'template',
    '`AWS::SecretsManager::Secret`',
  );
  add(
    'KMS customer-managed keys (the alarm topic)',
    counts.kmsKeys,
    'kmsKeyMonth',
    'template',
    '`AWS::KMS::Key` (rotation adds $1 a year later)',
  );
  add(
    'CloudWatch alarms (per metric evaluated)',
    counts.alarmMetrics,
    'cloudWatchAlarmMetricMonth',
    'template',
    '`AWS::CloudWatch::Alarm`: 1 metric each, a metric-math alarm each `MetricStat`',
    `${counts.alarmMetrics} (${counts.alarms} alarms)`,
  );
  if (counts.highResolutionAlarms > 0) {
    add(
      'CloudWatch high-resolution alarms',
      counts.highResolutionAlarms,
      null,
      'template',
      'period under 60 s: rate not in bench/prices.ts',
    );
  }
  const hours = (item: string, n: number, price: PriceId, how: string) =>
    add(item, n * HOURS_PER_MONTH, price, 'template', how, `${n} × 730 h`);
  hours('NAT gateway hours', counts.natGateways, 'natGatewayHour', '`AWS::EC2::NatGateway`');
  hours(
    'Public IPv4 address hours (the NAT gateway)',
    counts.elasticIps,
    'publicIpv4Hour',
    '`AWS::EC2::EIP`',
  );
  const instances = counts.brokers.reduce((n, b) => n + b.instances, 0);
  const types = [...new Set(counts.brokers.map((b) => b.instanceType))];
  add(
    'Amazon MQ broker instance-hours',
    instances * HOURS_PER_MONTH,
    types.length === 1 ? (BROKER_PRICES[types[0] as string] ?? null) : null,
    'template',
    '`AWS::AmazonMQ::Broker`: `HostInstanceType` × instances of its `DeploymentMode`',
    instances ? `${instances} × ${types.join(', ')} × 730 h` : '0',
  );
  const retention = Math.max(0, ...counts.aurora.map((a) => a.backupRetentionDays));
  add(
    `Aurora backups (${retention}-day retention; free up to the volume)`,
    0,
    null,
    'template',
    '`BackupRetentionPeriod`; at rest nothing changes, and backups up to the volume are free',
    '0 GB beyond the volume',
  );
  add(
    'Aurora storage',
    AT_REST_ASSUMPTIONS.volumeGb,
    'auroraStorageGbMonth',
    'estimate',
    'volume assumed (scales with the data kept)',
    `${AT_REST_ASSUMPTIONS.volumeGb} GB`,
  );
  if (usage) addUsage(add, counts, usage);
  const priced = lines.filter((l) => l.usdPerMonth !== null);
  const total = (ls: AtRestLine[]) =>
    round(
      ls.reduce((a, l) => a + (l.usdPerMonth ?? 0), 0),
      2,
    );
  return {
    configuration: configuration.id,
    label: configuration.label,
    counts,
    lines,
    usdPerMonth: total(priced),
    estimatedUsd: total(priced.filter((l) => l.basis === 'estimate')),
    unpriced: lines.filter((l) => l.usdPerMonth === null).map((l) => l.item),
  };
}

/** Adds a line: the item, its count, its price, where the count comes from, how the count reads. */
type AddLine = (
  item: string,
  count: number | null,
  price: PriceId | null,
  basis: AtRestBasis,
  how: string,
  countText?: string,
) => void;

function addUsage(add: AddLine, counts: TemplateCounts, usage: AtRestUsage): void {
  const { relay, maintenance } = counts;
  // the sweep runs at the first tick at least sweepIntervalMs after the last one ended
  const sweepPeriodMs =
    Math.ceil((relay.sweepIntervalMs + usage.sweep.billedMs) / relay.tickRateMs) * relay.tickRateMs;
  const relayRuns = MONTH_MS / relay.tickRateMs;
  const sweeps = MONTH_MS / sweepPeriodMs;
  const ticks = relayRuns - sweeps;
  const maintRuns = MONTH_MS / maintenance.rateMs;
  const runs = [
    { u: usage.sweep, n: sweeps, mb: relay.memoryMb, perHour: 3_600_000 / sweepPeriodMs },
    { u: usage.tick, n: ticks, mb: relay.memoryMb, perHour: 60 },
    {
      u: usage.maintenance,
      n: maintRuns,
      mb: maintenance.memoryMb,
      perHour: 3_600_000 / maintenance.rateMs,
    },
  ];
  const schedule = `${n0(ticks)} ticks, ${n0(sweeps)} sweeps (every ${sweepPeriodMs / 60_000} min), ${round(maintRuns, 1)} maintenance runs`;
  const on = `on the deployed bundles (${usage.measuredAt.slice(0, 10)})`;
  const measured = (item: string, count: number, price: PriceId, how = on, text?: string) =>
    add(item, count, price, 'measured', how, text);

  // a series is billed for each hour it is sent in: every hour for the tick's, the sweep's in
  // the hours a sweep falls in, maintenance's in one hour a day
  const billedHours = new Map<string, number>();
  for (const r of runs) {
    for (const s of r.u.series) {
      billedHours.set(s, Math.max(billedHours.get(s) ?? 0, Math.min(1, r.perHour)));
    }
  }
  const metricMonths = [...billedHours.values()].reduce((a, b) => a + b, 0);
  measured(
    'Custom metrics the functions publish at rest (EMF)',
    metricMonths,
    'cloudWatchCustomMetricMonth',
    `the EMF lines of a tick, a sweep and a maintenance run, ${on}`,
    `${billedHours.size} series, ${n2(metricMonths)} metric-months`,
  );
  const sum = (f: (r: (typeof runs)[number]) => number) => runs.reduce((a, r) => a + f(r), 0);
  measured(
    'Lambda requests (relay ticks, maintenance)',
    sum((r) => r.n),
    'lambdaRequest',
    schedule,
  );
  const gbSeconds = sum((r) => ((r.n * r.u.billedMs) / 1000) * (r.mb / 1024));
  measured(
    'Lambda GB-seconds',
    gbSeconds,
    'lambdaArmGbSecond',
    `billed durations ${on}; this machine's, slower than AWS's; init not counted`,
    n2(gbSeconds),
  );
  const callsOf = (service: string) => sum((r) => r.n * ofService(r.u.calls, service));
  measured('RDS Data API requests', callsOf('rds-data'), 'dataApiRequest');
  if (BROKER_BILLING[usage.transport] === 'requests') {
    measured(
      'SQS requests (the relay)',
      sum((r) => r.n * r.u.sqsUnits),
      'sqsStandardRequest',
    );
  }
  measured(
    'Secrets Manager API calls',
    callsOf('secrets-manager'),
    'secretsManagerCall',
    `${on} (the Data API reads the login secrets itself; a cold relay on RabbitMQ reads the broker’s once, not counted)`,
  );
  measured('SSM parameter calls (the relay state)', callsOf('ssm'), 'ssmStandardCall');
  const gb = (item: string, n: number, basis: AtRestBasis, how: string) =>
    add(item, n, 'cloudWatchLogsIngestedGb', basis, how, `${n2(n)} GB`);
  gb(
    'CloudWatch Logs ingested (function logs)',
    sum((r) => r.n * r.u.logBytes) / 1e9,
    'measured',
    `the lines each run writes ${on}, and Lambda’s START/END/REPORT`,
  );
  if (relay.inVpc) {
    const natGb = sum((r) => r.n * r.u.natBytes) / 1e9;
    measured(
      'NAT gateway data processed',
      natGb,
      'natGatewayGb',
      `the relay’s AWS requests from the VPC, both ways, ${on}`,
      `${n2(natGb)} GB`,
    );
  }
  const { flowRecordsPerMinute: records, flowRecordBytes: bytes } = AT_REST_ASSUMPTIONS;
  for (const flow of counts.flowLogs) {
    const talking = flow.functionsInVpc > 0;
    gb(
      `VPC flow logs (${flow.stack})`,
      talking ? (records * bytes * (MONTH_MS / 60_000)) / 1e9 : 0,
      'estimate',
      talking
        ? `assumed ≤ ${records} records/min × ${bytes} B (${flow.functionsInVpc} functions in the VPC)`
        : 'assumed none: nothing in this VPC talks at rest (paused cluster, functions outside)',
    );
  }
  for (const a of counts.aurora) {
    if (a.minAcu > 0) {
      add(
        'Aurora compute (never pauses)',
        a.minAcu * HOURS_PER_MONTH,
        'auroraAcuHour',
        'template',
        '`MinCapacity` above 0',
        `${a.minAcu} ACU × 730 h`,
      );
      continue;
    }
    const awake = (workMs: number) =>
      (AT_REST_ASSUMPTIONS.awakeAcu *
        (AT_REST_ASSUMPTIONS.resumeSeconds + workMs / 1000 + a.secondsUntilAutoPause)) /
      3600;
    const acuHours =
      sweeps * awake(usage.sweep.billedMs) + maintRuns * awake(usage.maintenance.billedMs);
    add(
      'Aurora compute: woken by each sweep and each maintenance run',
      acuHours,
      'auroraAcuHour',
      'estimate',
      `${n0(sweeps + maintRuns)} wakes × ${AT_REST_ASSUMPTIONS.awakeAcu} ACU × (${AT_REST_ASSUMPTIONS.resumeSeconds} s resume + the run + ${a.secondsUntilAutoPause} s to pause)`,
      `${n2(acuHours)} ACU-h`,
    );
  }
  const notCounted = (item: string, price: PriceId | null, how: string, text = '—') =>
    add(item, null, price, 'not counted', how, text);
  if (counts.sqsEventSourceMappings > 0) {
    notCounted(
      'SQS event source mappings’ long polling',
      'sqsStandardRequest',
      'how often Lambda’s pollers receive at rest is not documented',
      `${counts.sqsEventSourceMappings} mappings`,
    );
  }
  notCounted('Aurora I/O at rest', null, 'not measurable here (a resume reads from the volume)');
  if (counts.brokers.length > 0) {
    notCounted(
      'Amazon MQ broker storage and general logs',
      null,
      'not measurable here (empty queues; the broker’s own log lines)',
    );
  }
}

/** Each configuration's month: the templates synthesized in-process, the usage when measured. */
export async function benchCostAtRest(
  env: Env,
  transports: DeployedTransport[],
): Promise<{ months: AtRestMonth[]; usage: AtRestUsage[] }> {
  const usage: AtRestUsage[] = [];
  for (const t of transports) usage.push(await measureAtRest(env, t));
  const months: AtRestMonth[] = [];
  for (const c of AT_REST_CONFIGURATIONS) {
    if (!transports.includes(c.transport)) continue;
    const measured = usage.find((u) => u.transport === c.transport);
    months.push(monthAtRest(c, await countsOf(c), measured));
  }
  return { months, usage };
}

/** The template counts of one configuration (its templates synthesized without bundling). */
export async function countsOf(
  c: (typeof AT_REST_CONFIGURATIONS)[number],
): Promise<TemplateCounts> {
  const { dir } = await templatesFor({ transport: c.transport, context: c.context });
  return countTemplates(readAssembly(dir));
}

/** `$0.40 per secret-month`: a price as the table's rate column reads it. */
export function rateText(price: PriceId | null): string {
  if (price === null) return '—';
  const p = PRICES[price];
  if (p.usd === null) return 'not in the table';
  const per = p.per === 1 ? '' : `${p.per.toLocaleString('en-US')} `;
  const amount = p.usd >= 0.01 && Number.isInteger(p.usd * 100) ? p.usd.toFixed(2) : String(p.usd);
  return `$${amount} per ${per}${RATE_UNITS[price] ?? price}`;
}

const RATE_UNITS: Partial<Record<PriceId, string>> = {
  secretsManagerSecretMonth: 'secret-month',
  kmsKeyMonth: 'key-month',
  cloudWatchAlarmMetricMonth: 'alarm metric-month',
  cloudWatchCustomMetricMonth: 'metric-month',
  cloudWatchLogsIngestedGb: 'GB',
  natGatewayHour: 'hour',
  natGatewayGb: 'GB',
  publicIpv4Hour: 'address-hour',
  amazonMqBrokerHour: 'mq.m7g.medium instance-hour',
  amazonMqM7gLargeHour: 'mq.m7g.large instance-hour',
  auroraStorageGbMonth: 'GB-month',
  auroraAcuHour: 'ACU-hour',
  lambdaRequest: 'requests',
  lambdaArmGbSecond: 'GB-second',
  dataApiRequest: 'requests',
  sqsStandardRequest: 'requests',
  secretsManagerCall: 'calls',
  ssmStandardCall: 'call',
};

/** The cells of one item's row across the configurations (item, rate, each config, source). */
export function atRestRow(months: AtRestMonth[], item: string): string[] | undefined {
  const found = months.map((m) => m.lines.find((l) => l.item === item));
  const first = found.find((l) => l !== undefined);
  if (!first) return undefined;
  // the rate of the first configuration that has a priced count (brokers differ by type)
  const rates = [
    ...new Set(found.filter((l) => l && (l.count ?? 0) > 0).map((l) => rateText(l?.price ?? null))),
  ];
  return [
    item,
    rates.length ? rates.join('; ') : rateText(first.price),
    ...found.map((l) => (l ? `${l.countText} → ${usd(l.usdPerMonth)}` : '—')),
    `${first.basis}: ${first.how}`,
  ];
}

/** The at-rest table (markdown): one row per item, one column per configuration. */
export function atRestMarkdown(months: AtRestMonth[]): string[] {
  const items = [...new Set(months.flatMap((m) => m.lines.map((l) => l.item)))];
  const row = (cells: string[]) => `| ${cells.map((c) => c.replace(/\|/g, '/')).join(' | ')} |`;
  return [
    row([
      'a month at rest (no orders)',
      'rate',
      ...months.map((m) => `${m.label} + data stack`),
      'source',
    ]),
    `|${['---', '---', ...months.map(() => '---'), '---'].join('|')}|`,
    ...items.map((i) => row(atRestRow(months, i) as string[])),
    row([
      '**total (priced items)**',
      '',
      ...months.map(
        (m) =>
          `**$${m.usdPerMonth.toFixed(2)}** (estimates $${m.estimatedUsd.toFixed(2)})${m.unpriced.length ? ' + unpriced' : ''}`,
      ),
      '',
    ]),
  ];
}
