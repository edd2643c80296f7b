import type { DeployedAssembly } from '../devkit/lambda/assembly.js';
import { type PipelineConfig, type PipelineOverrides, pipelineConfig } from '../infra/config.js';
import { type RetryBudget, TEST_RETRY_BUDGET } from '../shared/config/budget.js';
import type { TransportName } from '../shared/transport/index.js';
import { RABBITMQ_DEFAULTS } from '../shared/transport/rabbitmq/constants.js';

/** Where the lab finds its services. */
export interface LabServices {
  databaseUrl: string;
  amqpUrl: string;
  managementUrl: string;
  sqsEndpoint: string;
  /** Secrets Manager (moto_server), for runs from the deployed bundles. */
  secretsEndpoint?: string;
  /** The synthesized assemblies of a run from the deployed bundles (`LabAssemblies`). */
  assemblies?: Assemblies;
}

/**
 * The stacks synthesized for a transport and overrides (lab/bundles.ts `LabAssemblies`; described
 * here, so the settings need nothing of the bundles).
 */
export interface Assemblies {
  get(transport: TransportName, overrides: PipelineOverrides): Promise<DeployedAssembly>;
  /** Synths that were not cached, with their durations. */
  readonly synthesized: readonly { key: string; ms: number }[];
}

/**
 * The time scale of a run. The scaled-down settings keep every mechanism (the same ladder shape,
 * the same rules) and shrink its delays, so the whole catalogue runs in a few minutes.
 */
export interface LabSettings {
  name: 'scaled' | 'real-time';
  /**
   * What runs the consumers and the relay: the sources in the lab's process (default), or the
   * deployed bundles (`--bundles`, lab/bundles.ts).
   */
  code?: 'sources' | 'bundles';
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

/**
 * What the stacks deploy (infra/config.ts `pipelineConfig()`, the RabbitMQ backend's delivery
 * limit and the Amazon MQ trigger's window): `--real-time` runs the catalogue at the deployed
 * timings, so every recovery time it measures is one a deployment shows. A test proves they are
 * equal to the synthesized templates' values (test/infra/lab.deployedNumbers.test.ts).
 */
export function realTimeSettings(config: PipelineConfig = pipelineConfig()): LabSettings {
  const functionTimeoutMs = config.timeoutsSeconds.reserve * 1000;
  return {
    name: 'real-time',
    budget: config.budget,
    visibilityTimeoutSeconds: config.sqs.visibilityTimeoutSeconds,
    functionTimeoutMs,
    deliveryLimit: RABBITMQ_DEFAULTS.deliveryLimit,
    mqBatchWindowMs:
      config.rabbitmq.maxBatchingWindowSeconds === undefined
        ? AMAZON_MQ_DEFAULT_WINDOW_MS
        : config.rabbitmq.maxBatchingWindowSeconds * 1000,
    // the longest wait: the whole ladder, then a visibility timeout or two and a function timeout
    waitMs: Math.max(
      20 * 60_000,
      ladderTotalMs(config.budget) +
        3 * config.sqs.visibilityTimeoutSeconds * 1000 +
        2 * functionTimeoutMs,
    ),
  };
}

/** Lambda's batching window for an Amazon MQ event source that sets none (ms). */
const AMAZON_MQ_DEFAULT_WINDOW_MS = 500;

export const REAL_TIME_SETTINGS: LabSettings = realTimeSettings();

/** How long a message takes to spend the whole retry ladder (first delivery to parking). */
export function ladderTotalMs(budget: RetryBudget): number {
  let total = 0;
  for (let i = 1; i <= budget.maxAttempts; i++) {
    total += budget.ladderMs[Math.min(i, budget.ladderMs.length) - 1] as number;
  }
  return total;
}
