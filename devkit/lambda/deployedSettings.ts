import { AURORA_AUTO_PAUSE, type AutoPauseOptions } from '../emulators/dataApiServer.js';
import type { AsyncInvokeSettings } from '../emulators/lambdaInvoke.js';
import { type DeployedAssembly, type DeployedFunction, targetOf } from './assembly.js';
import type { StackScope } from './intrinsics.js';

/**
 * The trigger settings of a synthesized deployment, read from its templates: what the local
 * trigger emulations, the schedule and `dev` run with, so that a CDK setting changed in the
 * stacks changes local behaviour (no second copy of any of these values). Where a template leaves
 * a setting out, Lambda's documented default applies (docs/aws-facts.md).
 */
export interface SqsEventSource {
  logicalId: string;
  function: DeployedFunction;
  /** The queue's name as the template declares it (unprefixed). */
  queueName: string;
  fifo: boolean;
  /** Records per invocation (default 10). */
  batchSize: number;
  /** Gathering window (default 0). */
  batchWindowMs: number;
  /** `ScalingConfig.MaximumConcurrency`; undefined when the template sets none. */
  maxConcurrency: number | undefined;
  /** `FunctionResponseTypes` has `ReportBatchItemFailures` (default off: the response is ignored). */
  reportBatchItemFailures: boolean;
  enabled: boolean;
  /** The queue's visibility timeout (s; default 30) and its redrive policy's `maxReceiveCount`. */
  visibilityTimeoutSeconds: number;
  maxReceiveCount: number | undefined;
  functionTimeoutMs: number;
}

export interface AmazonMqEventSource {
  logicalId: string;
  function: DeployedFunction;
  /** The broker's logical id, and the one queue of the mapping (`Queues`). */
  broker: string;
  queue: string;
  /** `VIRTUAL_HOST` (default `/`). */
  vhost: string;
  /** Messages per invocation (default 100). */
  batchSize: number;
  /** Batching window: `MaximumBatchingWindowInSeconds`, or Lambda's default of 500 ms when unset. */
  batchWindowMs: number;
  /** The `BASIC_AUTH` secret's value as a template value (resolve it against local secrets). */
  basicAuthSecret: unknown;
  enabled: boolean;
  functionTimeoutMs: number;
}

export interface ScheduleRule {
  stack: StackScope;
  logicalId: string;
  /** Every function the rule targets. */
  targets: DeployedFunction[];
  expression: string;
  /** The period of a `rate(…)` expression; undefined for `cron(…)`. */
  rateMs: number | undefined;
  enabled: boolean;
}

export interface DeployedSettings {
  sqs: SqsEventSource[];
  amazonMq: AmazonMqEventSource[];
  schedules: ScheduleRule[];
}

const UNITS: Record<string, number> = {
  minute: 60_000,
  minutes: 60_000,
  hour: 3_600_000,
  hours: 3_600_000,
  day: 86_400_000,
  days: 86_400_000,
};

/** `rate(1 minute)` → 60000; undefined for anything else (cron). */
export function rateMs(expression: string): number | undefined {
  const m = /^rate\((\d+)\s+(minutes?|hours?|days?)\)$/.exec(expression.trim());
  return m ? Number(m[1]) * (UNITS[m[2] as string] as number) : undefined;
}

export function deployedSettings(assembly: DeployedAssembly): DeployedSettings {
  const out: DeployedSettings = { sqs: [], amazonMq: [], schedules: [] };
  for (const { stack, logicalId, resource } of assembly.resources(
    'AWS::Lambda::EventSourceMapping',
  )) {
    const p = resource.Properties ?? {};
    const fn = assembly.functionNamedBy(stack, p.FunctionName);
    if (!fn) throw new Error(`${logicalId}: its FunctionName is not a function of the assembly`);
    const sourceId = targetOf(p.EventSourceArn);
    const source = sourceId ? stack.template.Resources?.[sourceId] : undefined;
    const enabled = p.Enabled !== false;
    const windowS = p.MaximumBatchingWindowInSeconds as number | undefined;
    if (source?.Type === 'AWS::SQS::Queue') {
      const q = source.Properties ?? {};
      const redrive = q.RedrivePolicy as { maxReceiveCount?: number } | undefined;
      out.sqs.push({
        logicalId,
        function: fn,
        queueName: String(q.QueueName ?? sourceId),
        fifo: q.FifoQueue === true || q.FifoQueue === 'true',
        batchSize: Number(p.BatchSize ?? 10),
        batchWindowMs: Number(windowS ?? 0) * 1000,
        maxConcurrency: (p.ScalingConfig as { MaximumConcurrency?: number } | undefined)
          ?.MaximumConcurrency,
        reportBatchItemFailures: ((p.FunctionResponseTypes as string[] | undefined) ?? []).includes(
          'ReportBatchItemFailures',
        ),
        enabled,
        visibilityTimeoutSeconds: Number(q.VisibilityTimeout ?? 30),
        maxReceiveCount: redrive?.maxReceiveCount,
        functionTimeoutMs: fn.timeoutSeconds * 1000,
      });
    } else if (source?.Type === 'AWS::AmazonMQ::Broker') {
      const access = (p.SourceAccessConfigurations ?? []) as { Type: string; URI: unknown }[];
      const queues = (p.Queues ?? []) as string[];
      out.amazonMq.push({
        logicalId,
        function: fn,
        broker: sourceId as string,
        queue: queues[0] as string,
        vhost: String(access.find((a) => a.Type === 'VIRTUAL_HOST')?.URI ?? '/'),
        batchSize: Number(p.BatchSize ?? 100),
        batchWindowMs: windowS === undefined ? 500 : windowS * 1000,
        basicAuthSecret: access.find((a) => a.Type === 'BASIC_AUTH')?.URI,
        enabled,
        functionTimeoutMs: fn.timeoutSeconds * 1000,
      });
    } else {
      throw new Error(`${logicalId}: an event source of type ${source?.Type} is not emulated`);
    }
  }
  for (const { stack, logicalId, resource } of assembly.resources('AWS::Events::Rule')) {
    const p = resource.Properties ?? {};
    if (typeof p.ScheduleExpression !== 'string') continue;
    const targets = ((p.Targets ?? []) as { Arn: unknown }[])
      .map((t) => assembly.functionNamedBy(stack, t.Arn))
      .filter((f): f is DeployedFunction => f !== undefined);
    out.schedules.push({
      stack,
      logicalId,
      targets,
      expression: p.ScheduleExpression,
      rateMs: rateMs(p.ScheduleExpression),
      enabled: (p.State ?? 'ENABLED') === 'ENABLED',
    });
  }
  return out;
}

/** The SQS event source of a function (`reserve-inventory-sqs`); throws when there is none. */
export function sqsEventSourceOf(settings: DeployedSettings, functionId: string): SqsEventSource {
  const s = settings.sqs.find((x) => x.function.id === functionId);
  if (!s) throw new Error(`no SQS event source for ${functionId} in the template`);
  return s;
}

export function amazonMqEventSourceOf(
  settings: DeployedSettings,
  functionId: string,
): AmazonMqEventSource {
  const s = settings.amazonMq.find((x) => x.function.id === functionId);
  if (!s) throw new Error(`no Amazon MQ event source for ${functionId} in the template`);
  return s;
}

/** The schedule rule targeting a function (`outbox-relay`); throws when there is none. */
export function scheduleOf(settings: DeployedSettings, functionId: string): ScheduleRule {
  const s = settings.schedules.find((r) => r.targets.some((f) => f.id === functionId));
  if (!s) throw new Error(`no schedule rule targets ${functionId} in the template`);
  return s;
}

/**
 * The template's auto-pause as the Data API endpoint's option: the deployment's one Aurora
 * Serverless v2 cluster's `SecondsUntilAutoPause` (AWS's default of 300 when a cluster at 0 ACU
 * leaves it out) × `timeScale`, and a resume of `resumeMs` (default `AURORA_AUTO_PAUSE.resumeMs`).
 * Throws when there is not exactly one cluster, or when it never pauses (its
 * `ServerlessV2ScalingConfiguration.MinCapacity`, in ACU, is above 0).
 */
export function autoPauseOptionsOf(
  assembly: DeployedAssembly,
  o: { timeScale: number; resumeMs?: number },
): AutoPauseOptions {
  const clusters = assembly.resources('AWS::RDS::DBCluster');
  const found = clusters[0];
  if (!found || clusters.length > 1) {
    throw new Error(`expected one AWS::RDS::DBCluster in the assembly, found ${clusters.length}`);
  }
  const scaling = (found.resource.Properties?.ServerlessV2ScalingConfiguration ?? {}) as {
    MinCapacity?: number;
    SecondsUntilAutoPause?: number;
  };
  const minCapacity = Number(scaling.MinCapacity ?? 0.5);
  if (minCapacity !== 0) {
    throw new Error(
      `${found.logicalId}: minimum capacity ${minCapacity} ACU: the cluster never pauses`,
    );
  }
  if (!Number.isFinite(o.timeScale) || o.timeScale <= 0) {
    throw new RangeError(`autoPause.timeScale: ${o.timeScale} is not > 0`);
  }
  const seconds = scaling.SecondsUntilAutoPause ?? AURORA_AUTO_PAUSE.defaultSecondsUntilAutoPause;
  return {
    secondsUntilAutoPause: Number(seconds) * o.timeScale,
    resumeMs: o.resumeMs ?? AURORA_AUTO_PAUSE.resumeMs,
  };
}

/** A function's asynchronous invocation settings: its reserved concurrency and EventInvokeConfig. */
export function asyncInvokeSettingsOf(f: DeployedFunction): AsyncInvokeSettings {
  const resource = f.stack.template.Resources?.[f.logicalId];
  const reserved = resource?.Properties?.ReservedConcurrentExecutions;
  const config = Object.values(f.stack.template.Resources ?? {}).find(
    (r) =>
      r.Type === 'AWS::Lambda::EventInvokeConfig' &&
      JSON.stringify(r.Properties?.FunctionName) === JSON.stringify({ Ref: f.logicalId }),
  )?.Properties;
  const age = config?.MaximumEventAgeInSeconds;
  const retries = config?.MaximumRetryAttempts;
  return {
    reservedConcurrency: typeof reserved === 'number' ? reserved : undefined,
    maxEventAgeMs: typeof age === 'number' ? age * 1000 : undefined,
    retryAttempts: typeof retries === 'number' ? retries : undefined,
  };
}

/**
 * Variables a function's template sets that only make sense deployed (where the database, broker
 * and queues of AWS are, the bundle's own paths, Powertools' service name): a local run of the
 * sources keeps its own for these.
 */
const DEPLOYMENT_ONLY = new Set([
  'DB_DRIVER',
  'DATA_API_RESOURCE_ARN',
  'DATA_API_SECRET_ARN',
  'DATA_API_DATABASE',
  'INVENTORY_DATA_API_DATABASE',
  'DB_LOGIN_SECRETS',
  'BROKER_SECRET_ARN',
  'BROKER_AMQP_ENDPOINT',
  'BROKER_MANAGEMENT_ENDPOINT',
  'BROKER_VHOST',
  'BROKER_PIPELINE_SECRET_ARN',
  'SOURCE_QUEUE_URL',
  'PARKING_QUEUE_URL',
  'RESULTS_QUEUE_URL',
  'MIGRATIONS_DIR',
  'NODE_OPTIONS',
  'POWERTOOLS_SERVICE_NAME',
]);

/**
 * The environment a local run of a function's sources gets: the function's settings as its
 * template sets them (budget, retention, relay tuning, retry mode, its timeout), under what the
 * caller set explicitly (`explicit`, e.g. `process.env`: a variable set there wins).
 */
export function localEnvironment(
  fn: DeployedFunction,
  explicit: NodeJS.ProcessEnv,
): NodeJS.ProcessEnv {
  // the literal (non-reference) variables
  const fromTemplate = Object.fromEntries(
    Object.entries(fn.environment)
      .filter(([name, v]) => !DEPLOYMENT_ONLY.has(name) && (v === null || typeof v !== 'object'))
      .map(([k, v]) => [k, String(v)]),
  );
  return { ...fromTemplate, ...explicit };
}
