import {
  BUDGET_ENV,
  type Env,
  type EnvName,
  RETENTION_ENV,
  type Retention,
  type RetryBudget,
} from './env.js';

/** Environment variables for a function: only names the schema reads (a typo fails typecheck). */
export type FunctionEnvironment = { [K in EnvName]?: string };

/**
 * Typed settings of a deployed function, each written to the variable `loadEnv()` reads it from.
 * Values may be CDK tokens (ARNs, queue URLs, broker endpoints resolved at deploy).
 */
export interface FunctionSettings {
  transport?: Env['TRANSPORT'];
  /** The database through the RDS Data API (sets `DB_DRIVER=data-api`). */
  dataApi?: { resourceArn: string; secretArn: string; database: string };
  /** The inventory service's database in the same cluster, for a function that reaches it too. */
  inventoryDataApiDatabase?: string;
  budget?: RetryBudget;
  retention?: Retention;
  relay?: {
    drainBudgetMs?: number;
    idleWaitMs?: number;
    lingerMs?: number;
    sweepQuietMs?: number;
    sweepIntervalMs?: number;
  };
  sqs?: {
    sourceQueueUrl?: string;
    parkingQueueUrl?: string;
    resultsQueueUrl?: string;
    /** The SNS topics of the fan-out streams the function publishes, by stream. */
    topicArns?: Readonly<Record<string, string>>;
    retryMode?: Env['SQS_RETRY_MODE'];
    /** The visibility timeout of the queue the function consumes (checked against its timeout). */
    visibilityTimeoutSeconds?: number;
  };
  /** The function's own timeout (the ceiling of its transaction bounds): set by NodeFunction. */
  functionTimeoutMs?: number;
  /** An Amazon MQ broker: the secret's ARN (never its value) and the endpoints it reports. */
  broker?: { secretArn: string; amqpEndpoint: string; managementEndpoint: string; vhost: string };
  /** migrate (a service of yours): each login's secret ARN, by the group role it joins. */
  groupLoginSecretArns?: Readonly<Record<string, string>>;
  /** broker-setup: the pipeline broker user to create or update (its secret's ARN). */
  brokerPipelineSecretArn?: string;
  migrationsDir?: string;
}

/**
 * Maps typed settings to the environment the runtime schema reads: the one place, with
 * `shared/config/env.ts`, that spells a variable's name. `loadEnv(functionEnvironment(s))`
 * gives back `s` (the infra tests check it on every synthesized function).
 */
export function functionEnvironment(settings: FunctionSettings): FunctionEnvironment {
  const env: FunctionEnvironment = {};
  if (settings.transport) env.TRANSPORT = settings.transport;
  if (settings.dataApi) {
    env.DB_DRIVER = 'data-api';
    env.DATA_API_RESOURCE_ARN = settings.dataApi.resourceArn;
    env.DATA_API_SECRET_ARN = settings.dataApi.secretArn;
    env.DATA_API_DATABASE = settings.dataApi.database;
  }
  const { budget, retention, relay, sqs, broker } = settings;
  if (budget) {
    env[BUDGET_ENV.ladderMs] = budget.ladderMs.join(',');
    env[BUDGET_ENV.maxAttempts] = String(budget.maxAttempts);
    env[BUDGET_ENV.maxAgeMs] = String(budget.maxAgeMs);
    env[BUDGET_ENV.jitter] = String(budget.jitter);
  }
  if (retention) {
    env[RETENTION_ENV.parkingMs] = String(retention.parkingMs);
    env[RETENTION_ENV.inboxMs] = String(retention.inboxMs);
    env[RETENTION_ENV.publishedOutboxMs] = String(retention.publishedOutboxMs);
    if (retention.redriveWindowMs !== undefined) {
      env[RETENTION_ENV.redriveWindowMs] = String(retention.redriveWindowMs);
    }
    if (retention.redriveLimit !== undefined) {
      env[RETENTION_ENV.redriveLimit] = String(retention.redriveLimit);
    }
  }
  if (relay?.drainBudgetMs !== undefined) env.RELAY_DRAIN_BUDGET_MS = String(relay.drainBudgetMs);
  if (relay?.idleWaitMs !== undefined) env.RELAY_IDLE_WAIT_MS = String(relay.idleWaitMs);
  if (relay?.lingerMs !== undefined) env.RELAY_LINGER_MS = String(relay.lingerMs);
  if (relay?.sweepQuietMs !== undefined) env.RELAY_SWEEP_QUIET_MS = String(relay.sweepQuietMs);
  if (relay?.sweepIntervalMs !== undefined)
    env.RELAY_SWEEP_INTERVAL_MS = String(relay.sweepIntervalMs);
  if (sqs?.sourceQueueUrl !== undefined) env.SOURCE_QUEUE_URL = sqs.sourceQueueUrl;
  if (sqs?.parkingQueueUrl !== undefined) env.PARKING_QUEUE_URL = sqs.parkingQueueUrl;
  if (sqs?.resultsQueueUrl !== undefined) env.RESULTS_QUEUE_URL = sqs.resultsQueueUrl;
  if (sqs?.topicArns !== undefined) {
    env.STREAM_TOPIC_ARNS = pairs(sqs.topicArns);
  }
  if (sqs?.retryMode !== undefined) env.SQS_RETRY_MODE = sqs.retryMode;
  if (sqs?.visibilityTimeoutSeconds !== undefined) {
    env.SQS_VISIBILITY_TIMEOUT_S = String(sqs.visibilityTimeoutSeconds);
  }
  if (settings.functionTimeoutMs !== undefined) {
    env.FUNCTION_TIMEOUT_MS = String(settings.functionTimeoutMs);
  }
  if (broker) {
    env.BROKER_SECRET_ARN = broker.secretArn;
    env.BROKER_AMQP_ENDPOINT = broker.amqpEndpoint;
    env.BROKER_MANAGEMENT_ENDPOINT = broker.managementEndpoint;
    env.BROKER_VHOST = broker.vhost;
  }
  if (settings.migrationsDir !== undefined) env.MIGRATIONS_DIR = settings.migrationsDir;
  if (settings.inventoryDataApiDatabase !== undefined) {
    env.INVENTORY_DATA_API_DATABASE = settings.inventoryDataApiDatabase;
  }
  if (settings.groupLoginSecretArns !== undefined) {
    env.DB_LOGIN_SECRETS = pairs(settings.groupLoginSecretArns);
  }
  if (settings.brokerPipelineSecretArn !== undefined) {
    env.BROKER_PIPELINE_SECRET_ARN = settings.brokerPipelineSecretArn;
  }
  return env;
}

/** `{a: x, b: y}` → `a=x,b=y`. */
const pairs = (values: Readonly<Record<string, string>>) =>
  Object.entries(values)
    .map(([name, value]) => `${name}=${value}`)
    .join(',');
