import {
  ConfigError,
  DEFAULT_RELAY_SETTINGS,
  DEFAULT_RETENTION,
  DEFAULT_RETRY_BUDGET,
  type RelaySettings,
  type Retention,
  type RetryBudget,
  validateBudget,
  visibilityTimeoutRule,
} from '../shared/index.js';
import { DEFAULT_DEADLINE_MARGIN_MS } from '../shared/middleware/transactionDeadline.js';
import { RABBITMQ_NAMES, RETRY_NAMES, SQS_NAMES } from '../shared/pipeline/names.js';
import { AMAZON_MQ_TRIGGER } from '../shared/transport/rabbitmq/index.js';

/**
 * The deployed pipeline's settings, derived from the same config module the local runtime uses
 * (queue names, retry budget, retention), so what runs in AWS is what the tests exercise. The
 * functions get them through `functionEnvironment()` (shared/config), which writes exactly the
 * variables the runtime schema reads.
 */
export interface PipelineConfig {
  names: typeof SQS_NAMES;
  budget: RetryBudget;
  retention: Retention;
  timeoutsSeconds: { placeOrder: number; relay: number; reserve: number; maintenance: number };
  sqs: {
    /** AWS's rule: at least 6 × the consumer function's timeout. */
    visibilityTimeoutSeconds: number;
    /**
     * `inventory-orders`: SQS's maximum (14 days, no cost). The consumer parks by sending a new
     * message (a full parking retention from the park); only the redrive policy's safety net moves
     * the original, whose retention counts from its first enqueue (docs/design.md §5).
     */
    sourceRetentionSeconds: number;
    /**
     * `orders-inventory-results`: every message of its parking queue comes through the redrive
     * policy (the original, its enqueue time kept), so it must be shorter than the parking
     * retention: 4 days leave a parked result at least 10 days there.
     */
    resultsRetentionSeconds: number;
    /** SQS's own safety net, above the application's budget. */
    maxReceiveCount: number;
    batchSize: number;
    maxBatchingWindowSeconds: number;
    maxConcurrency: number;
    /** How reserve-inventory-sqs retries later (`SQS_RETRY_MODE`). */
    retryMode: 'visibility' | 'resend';
  };
  /**
   * The relay (docs/outbox-relay.md): kicked by the producers after COMMIT, each invocation drains
   * until no row came for `lingerMs` (at most `drainBudgetMs`); the 1-minute schedule ticks, and
   * sweeps the outboxes only after `sweepQuietMs` without traffic and `sweepIntervalMs` after the
   * last look (at once while rows are left). `reservedConcurrency` is opt-in (0: unreserved, the
   * default, which deploys on any account; a reservation needs the account's unreserved
   * concurrency minus 100: docs/operations.md, "Before deploying").
   */
  relay: RelaySettings;
  /**
   * The HTTP API in front of place-order: the stage's default route throttling (requests per
   * second and burst, within the account's per-Region limits) and place-order's reserved
   * concurrency (0: unreserved, the default, as for the relay).
   */
  httpApi: {
    throttlingRateLimit: number;
    throttlingBurstLimit: number;
    placeOrderReservedConcurrency: number;
  };
  rabbitmq: {
    /** The queue the Amazon MQ event source reads, and where parked messages wait. */
    queue: string;
    parkingQueue: string;
    vhost: string;
    /** Amazon MQ event source: messages per invocation and batching window (as the local trigger). */
    batchSize: number;
    /** Whole seconds (CloudFormation's type); unset = Lambda's default of 500 ms. */
    maxBatchingWindowSeconds: number | undefined;
  };
}

/**
 * The Amazon MQ broker: a preset (`-c broker=test|production`), single settings on top of it
 * (`-c brokerEngine=3.13 -c brokerInstance=… -c brokerDeployment=cluster`).
 */
export interface BrokerSettings {
  /** 4.2 is Amazon MQ's recommended version (mq.m7g only); 3.13 also runs on t3/m5. */
  engineVersion: string;
  instanceType: string;
  deployment: 'single' | 'cluster';
}

/**
 * `test`, the default: one `mq.m7g.medium` instance, which Amazon MQ recommends only for testing
 * (by default 100 connections and 500 channels; docs/aws-facts.md, "Amazon MQ for RabbitMQ").
 * `production`: a three-node cluster of `mq.m7g.large`, the smallest type Amazon MQ recommends for
 * production.
 */
export const BROKER_PRESETS = {
  test: { engineVersion: '4.2', instanceType: 'mq.m7g.medium', deployment: 'single' },
  production: { engineVersion: '4.2', instanceType: 'mq.m7g.large', deployment: 'cluster' },
} as const satisfies Record<string, BrokerSettings>;

export type BrokerPreset = keyof typeof BROKER_PRESETS;

/** What `cdk deploy` creates without `-c broker=…`: the test size. */
export const DEFAULT_BROKER: BrokerSettings = BROKER_PRESETS.test;

/** Any setting of the pipeline but its pinned names, each one optional (nested objects too). */
export type PipelineOverrides = {
  [K in Exclude<keyof PipelineConfig, 'names'>]?: Partial<PipelineConfig[K]>;
};

/**
 * The pipeline's settings for a budget and retention, checked by the runtime's own rules before
 * anything is synthesized: a budget or retention the functions would refuse at cold start, or a
 * visibility timeout below 6 × the reserve function's timeout, fails `cdk synth` (`ConfigError`).
 * `overrides` replace single settings (`cdk synth -c pipeline='{"sqs":{"batchSize":3}}'`, the
 * local runner's tests and the lab's `--bundles`); what is derived from another setting (the
 * visibility timeout from the reserve timeout, `maxReceiveCount` from the budget) follows the
 * overridden one unless it is overridden itself.
 */
export function pipelineConfig(
  budget: RetryBudget = DEFAULT_RETRY_BUDGET,
  retention: Retention = DEFAULT_RETENTION,
  overrides: PipelineOverrides = {},
): PipelineConfig {
  const b = { ...budget, ...overrides.budget };
  const timeouts = {
    placeOrder: 10,
    relay: 60,
    reserve: 30,
    maintenance: 300,
    ...overrides.timeoutsSeconds,
  };
  const r = { ...retention, ...overrides.retention };
  // the queues' retention follows a parking retention set shorter than SQS's 14 days (the rules
  // below: a redrive-policy dead letter keeps its enqueue time in parking)
  const parkingSeconds = Math.floor(r.parkingMs / 1000);
  return validatePipelineConfig({
    names: SQS_NAMES,
    budget: b,
    retention: r,
    timeoutsSeconds: timeouts,
    sqs: {
      visibilityTimeoutSeconds: 6 * timeouts.reserve,
      sourceRetentionSeconds: Math.min(14 * 24 * 3600, parkingSeconds),
      resultsRetentionSeconds: Math.min(4 * 24 * 3600, Math.floor(parkingSeconds / 2)),
      maxReceiveCount: b.maxAttempts + 3,
      batchSize: 10,
      maxBatchingWindowSeconds: 0,
      maxConcurrency: 5,
      retryMode: 'visibility',
      ...overrides.sqs,
    },
    relay: { ...DEFAULT_RELAY_SETTINGS, ...overrides.relay },
    httpApi: {
      // well under the account's 10,000 requests/s and burst of 5,000 (shared by every API of
      // the Region), and under what place-order can serve on a new account's concurrency
      throttlingRateLimit: 50,
      throttlingBurstLimit: 100,
      placeOrderReservedConcurrency: 0,
      ...overrides.httpApi,
    },
    rabbitmq: {
      queue: RABBITMQ_NAMES.inventoryQueue,
      parkingQueue: RETRY_NAMES.parkingQueue,
      vhost: '/',
      batchSize: AMAZON_MQ_TRIGGER.batchSize,
      maxBatchingWindowSeconds: mqBatchingWindowSeconds(AMAZON_MQ_TRIGGER.batchWindowMs),
      ...overrides.rabbitmq,
    },
  });
}

const OVERRIDABLE: Record<keyof PipelineOverrides, true> = {
  budget: true,
  retention: true,
  timeoutsSeconds: true,
  sqs: true,
  relay: true,
  httpApi: true,
  rabbitmq: true,
};

/**
 * The pipeline from the `pipeline` context value (a JSON object of {@link PipelineOverrides}, or
 * unset for the defaults). An unknown section or setting, or a value of another type than the
 * default's, fails the synth naming it.
 */
export function pipelineConfigFromContext(value: unknown): PipelineConfig {
  if (value === undefined || value === null || value === '') return pipelineConfig();
  let overrides: unknown = value;
  if (typeof value === 'string') {
    try {
      overrides = JSON.parse(value);
    } catch {
      throw new ConfigError(`-c pipeline: not JSON (${value})`);
    }
  }
  if (typeof overrides !== 'object' || overrides === null || Array.isArray(overrides)) {
    throw new ConfigError('-c pipeline: expected a JSON object');
  }
  const defaults = pipelineConfig() as unknown as Record<string, Record<string, unknown>>;
  for (const [section, fields] of Object.entries(overrides)) {
    if (!(section in OVERRIDABLE)) throw new ConfigError(`-c pipeline: unknown section ${section}`);
    for (const [key, v] of Object.entries(fields as Record<string, unknown>)) {
      const current = defaults[section]?.[key];
      const optional = section === 'rabbitmq' && key === 'maxBatchingWindowSeconds';
      const same =
        Array.isArray(current) === Array.isArray(v) &&
        (typeof current === typeof v || (optional && typeof v === 'number'));
      if (!(section === 'retention' || key in (defaults[section] ?? {})) || !same) {
        throw new ConfigError(`-c pipeline: ${section}.${key}: unknown or of the wrong type`);
      }
    }
  }
  return pipelineConfig(undefined, undefined, overrides as PipelineOverrides);
}

/** The cross-field rules of the runtime configuration, on the pipeline's fields. */
export function validatePipelineConfig(config: PipelineConfig): PipelineConfig {
  // transactionDeadline rolls every open transaction back this long before the function's
  // timeout: a function needs time beyond it, or no transaction of its can ever commit
  for (const [name, seconds] of Object.entries(config.timeoutsSeconds)) {
    if (seconds * 1000 < DEFAULT_DEADLINE_MARGIN_MS + 1_000) {
      throw new ConfigError(
        `invalid pipeline configuration: timeoutsSeconds.${name}: ${seconds} s leaves no time for a transaction (they are rolled back ${DEFAULT_DEADLINE_MARGIN_MS} ms before the timeout): at least ${(DEFAULT_DEADLINE_MARGIN_MS + 1_000) / 1000} s`,
      );
    }
  }
  const visibility = visibilityTimeoutRule(
    config.sqs.visibilityTimeoutSeconds,
    config.timeoutsSeconds.reserve * 1000,
    'timeoutsSeconds.reserve',
  );
  if (visibility) {
    throw new ConfigError(
      `invalid pipeline configuration: sqs.visibilityTimeoutSeconds: ${config.sqs.visibilityTimeoutSeconds} s ${visibility}`,
    );
  }
  // SQS moves a message into a dead-letter queue with its enqueue time: a parked result (all come
  // that way) would expire at once from a parking queue that keeps it no longer than its source
  const parkingSeconds = config.retention.parkingMs / 1000;
  if (config.sqs.resultsRetentionSeconds >= parkingSeconds) {
    throw new ConfigError(
      `invalid pipeline configuration: sqs.resultsRetentionSeconds: ${config.sqs.resultsRetentionSeconds} s must be below the parking retention (${parkingSeconds} s): a result moved to its parking queue keeps its enqueue time there`,
    );
  }
  if (config.sqs.sourceRetentionSeconds > parkingSeconds) {
    throw new ConfigError(
      `invalid pipeline configuration: sqs.sourceRetentionSeconds: ${config.sqs.sourceRetentionSeconds} s must be at most the parking retention (${parkingSeconds} s): a message moved to parking by the redrive policy keeps its enqueue time there`,
    );
  }
  for (const [name, n] of [
    ['relay.reservedConcurrency', config.relay.reservedConcurrency],
    ['httpApi.placeOrderReservedConcurrency', config.httpApi.placeOrderReservedConcurrency],
  ] as const) {
    if (!Number.isInteger(n) || n < 0) {
      throw new ConfigError(
        `invalid pipeline configuration: ${name}: ${n}: a whole number of concurrent executions, 0 for unreserved`,
      );
    }
  }
  const { throttlingRateLimit: rate, throttlingBurstLimit: burst } = config.httpApi;
  if (!(rate > 0) || !Number.isInteger(burst) || burst < 1) {
    throw new ConfigError(
      `invalid pipeline configuration: httpApi: throttlingRateLimit ${rate} must be above 0 (requests per second) and throttlingBurstLimit ${burst} a whole number of at least 1`,
    );
  }
  validateBudget(config.budget, config.retention);
  return config;
}

/**
 * CloudFormation takes the Amazon MQ batching window in whole seconds; Lambda's default of 500 ms
 * is had only by leaving it unset.
 */
export function mqBatchingWindowSeconds(ms: number): number | undefined {
  if (ms === 500) return undefined;
  if (ms % 1000 !== 0)
    throw new Error(`Amazon MQ batching window ${ms} ms: use 500 or whole seconds`);
  return ms / 1000;
}
