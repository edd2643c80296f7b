import {
  DEFAULT_RETENTION,
  DEFAULT_RETRY_BUDGET,
  type Retention,
  type RetryBudget,
  validateBudget,
} from '../shared/config/budget.js';
import { ConfigError } from '../shared/config/errors.js';
import { visibilityTimeoutRule } from '../shared/config/rules.js';
import {
  AMAZON_MQ_TRIGGER,
  RABBITMQ_NAMES,
  RETRY_NAMES,
} from '../shared/transport/rabbitmq/index.js';
import { SQS_NAMES } from '../shared/transport/sqs/index.js';

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
    sourceRetentionSeconds: number;
    /** SQS's own safety net, above the application's budget. */
    maxReceiveCount: number;
    batchSize: number;
    maxBatchingWindowSeconds: number;
    maxConcurrency: number;
  };
  relay: { drainBudgetMs: number; idleWaitMs: number };
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

/** The Amazon MQ broker; `cdk -c brokerEngine=3.13 -c brokerInstance=… -c brokerDeployment=cluster`. */
export interface BrokerSettings {
  /** 4.2 is Amazon MQ's recommended version (mq.m7g only); 3.13 also runs on t3/m5. */
  engineVersion: string;
  instanceType: string;
  deployment: 'single' | 'cluster';
}

export const DEFAULT_BROKER: BrokerSettings = {
  engineVersion: '4.2',
  instanceType: 'mq.m7g.medium',
  deployment: 'single',
};

/**
 * The pipeline's settings for a budget and retention, checked by the runtime's own rules before
 * anything is synthesized: a budget or retention the functions would refuse at cold start, or a
 * visibility timeout below 6 × the reserve function's timeout, fails `cdk synth` (`ConfigError`).
 */
export function pipelineConfig(
  budget: RetryBudget = DEFAULT_RETRY_BUDGET,
  retention: Retention = DEFAULT_RETENTION,
): PipelineConfig {
  const reserveTimeout = 30;
  return validatePipelineConfig({
    names: SQS_NAMES,
    budget,
    retention,
    timeoutsSeconds: { placeOrder: 10, relay: 60, reserve: reserveTimeout, maintenance: 300 },
    sqs: {
      visibilityTimeoutSeconds: 6 * reserveTimeout,
      sourceRetentionSeconds: 4 * 24 * 3600,
      maxReceiveCount: budget.maxAttempts + 3,
      batchSize: 10,
      maxBatchingWindowSeconds: 0,
      maxConcurrency: 5,
    },
    // the relay drains for 50 s of each 60 s invocation (schedule: once a minute)
    relay: { drainBudgetMs: 50_000, idleWaitMs: 100 },
    rabbitmq: {
      queue: RABBITMQ_NAMES.inventoryQueue,
      parkingQueue: RETRY_NAMES.parkingQueue,
      vhost: '/',
      batchSize: AMAZON_MQ_TRIGGER.batchSize,
      maxBatchingWindowSeconds: mqBatchingWindowSeconds(AMAZON_MQ_TRIGGER.batchWindowMs),
    },
  });
}

/** The cross-field rules of the runtime configuration, on the pipeline's fields. */
export function validatePipelineConfig(config: PipelineConfig): PipelineConfig {
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
