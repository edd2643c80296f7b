import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import type { RetryBudget } from '../../shared/index.js';
import type { SqsRetryMode } from '../../shared/transport/sqs/constants.js';
import { type ConsumerRig, InventoryRig } from './inventory.js';
import { NatsInventoryRig } from './natsInventory.js';
import { SQS_SERVERS } from './sqs.js';
import { SqsInventoryRig } from './sqsInventory.js';

export interface ConsumerRigOptions {
  budget?: RetryBudget;
  /** One of the rig's `retryModes` (default: the first). */
  retryMode?: string;
  /**
   * How long a delivery is held before it comes again: the source queue's visibility timeout (SQS;
   * default 6 s), JetStream's `AckWait` (default 30 s); none on RabbitMQ (a closed channel).
   */
  visibilityTimeoutSeconds?: number;
}

/**
 * One transport's consumer side as the integration tests run it: a rig of its own (database and
 * broker namespace) whose `start` runs the reserve consumer as deployed.
 */
export interface ConsumerRigKind<B extends ConsumerRig = ConsumerRig> {
  /** Shown in the test names. */
  name: string;
  /** The transport's ways of retrying, the default first; the fault tests run each. */
  retryModes: readonly [string, ...string[]];
  /** How far from its ladder step a retry may come back (ms early, ms late). */
  retryDelayTolerance: { earlyMs: number; lateMs: number };
  /** `label` names the rig's database and namespace: short (an SQS queue prefix has 40 characters at most). */
  setup(label: string, options?: ConsumerRigOptions): Promise<B>;
}

/** RabbitMQ (Amazon MQ), the reserve consumer as a worker. */
export const RABBITMQ_RIG: ConsumerRigKind<InventoryRig> = {
  name: 'RabbitMQ worker',
  retryModes: ['retry queues'],
  retryDelayTolerance: { earlyMs: 50, lateMs: 1_500 },
  setup: (label, options = {}) => InventoryRig.create(label, options.budget ?? TEST_RETRY_BUDGET),
};

/** SQS, the reserve function behind the trigger emulation, on each SQS server of this run. */
export const SQS_RIGS: ConsumerRigKind<SqsInventoryRig>[] = SQS_SERVERS.map((server) => ({
  name: `SQS ${server.name}`,
  retryModes: ['visibility', 'resend'],
  retryDelayTolerance: { earlyMs: 100, lateMs: 2_500 },
  setup: (label, options = {}) =>
    SqsInventoryRig.create(server, label, {
      ...(options.budget ? { budget: options.budget } : {}),
      ...(options.retryMode ? { mode: options.retryMode as SqsRetryMode } : {}),
      ...(options.visibilityTimeoutSeconds
        ? { visibilityTimeoutSeconds: options.visibilityTimeoutSeconds }
        : {}),
    }),
}));

/** NATS JetStream, the reserve consumer as a worker (its only mode); a retry is a nak delay. */
export const NATS_RIG: ConsumerRigKind<NatsInventoryRig> = {
  name: 'NATS JetStream worker',
  retryModes: ['nak delay'],
  retryDelayTolerance: { earlyMs: 50, lateMs: 1_500 },
  setup: (label, options = {}) =>
    NatsInventoryRig.create(
      label,
      options.budget ?? TEST_RETRY_BUDGET,
      options.visibilityTimeoutSeconds
        ? { ackWaitMs: options.visibilityTimeoutSeconds * 1_000 }
        : {},
    ),
};

/**
 * Every transport the transport-agnostic consumer tests run on (`describe.each`). A new transport
 * adds its entry here.
 */
export const CONSUMER_RIGS: readonly ConsumerRigKind[] = [RABBITMQ_RIG, ...SQS_RIGS, NATS_RIG];

/**
 * A test's options in the per-transport suites: the suites (`describe.each(…, { concurrent: true })`)
 * run side by side, each with a rig of its own; a suite's tests run in order.
 */
export const inOrder = { concurrent: false };
