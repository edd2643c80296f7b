import {
  DEFAULT_RETRY_BUDGET,
  type RetryBudget,
  TEST_RETRY_BUDGET,
} from '../shared/config/budget.js';

/** Where the lab finds its services. */
export interface LabServices {
  databaseUrl: string;
  amqpUrl: string;
  managementUrl: string;
  sqsEndpoint: string;
}

/**
 * The time scale of a run. The scaled-down settings keep every mechanism (the same ladder shape,
 * the same rules) and shrink its delays, so the whole catalogue runs in a few minutes.
 */
export interface LabSettings {
  name: 'scaled' | 'real-time';
  budget: RetryBudget;
  /** SQS source queue visibility timeout (s). */
  visibilityTimeoutSeconds: number;
  /** The consumer function's timeout (ms); the visibility timeout must be ≥ 6 × it. */
  functionTimeoutMs: number;
  /** Quorum queue delivery limit (RabbitMQ's backstop against redelivery loops). */
  deliveryLimit: number;
  /** Amazon MQ trigger batching window (ms). */
  mqBatchWindowMs: number;
  /** How long any one wait of a scenario may take before the run fails. */
  waitMs: number;
}

export const SCALED_SETTINGS: LabSettings = {
  name: 'scaled',
  budget: TEST_RETRY_BUDGET,
  visibilityTimeoutSeconds: 3,
  functionTimeoutMs: 500,
  deliveryLimit: 4,
  mqBatchWindowMs: 100,
  waitMs: 40_000,
};

export const REAL_TIME_SETTINGS: LabSettings = {
  name: 'real-time',
  budget: DEFAULT_RETRY_BUDGET,
  visibilityTimeoutSeconds: 30,
  functionTimeoutMs: 5_000,
  deliveryLimit: 10,
  mqBatchWindowMs: 500,
  waitMs: 20 * 60_000,
};

/** How long a message takes to spend the whole retry ladder (first delivery to parking). */
export function ladderTotalMs(budget: RetryBudget): number {
  let total = 0;
  for (let i = 1; i <= budget.maxAttempts; i++) {
    total += budget.ladderMs[Math.min(i, budget.ladderMs.length) - 1] as number;
  }
  return total;
}
