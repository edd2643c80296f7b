import {
  DEFAULT_RETENTION,
  DEFAULT_RETRY_BUDGET,
  type Retention,
  type RetryBudget,
} from '../shared/config/budget.js';
import { SQS_NAMES } from '../shared/transport/sqs/names.js';

/**
 * The deployed pipeline's settings, derived from the same config module the local runtime uses
 * (queue names, retry budget, retention), so what runs in AWS is what the tests exercise.
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
}

export function pipelineConfig(
  budget: RetryBudget = DEFAULT_RETRY_BUDGET,
  retention: Retention = DEFAULT_RETENTION,
): PipelineConfig {
  const reserveTimeout = 30;
  return {
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
  };
}

/** Environment variables that carry the retry budget to the functions. */
export function budgetEnvironment(budget: RetryBudget): Record<string, string> {
  return {
    RETRY_LADDER_MS: budget.ladderMs.join(','),
    RETRY_MAX_ATTEMPTS: String(budget.maxAttempts),
    RETRY_MAX_AGE_MS: String(budget.maxAgeMs),
    RETRY_JITTER: String(budget.jitter),
  };
}
