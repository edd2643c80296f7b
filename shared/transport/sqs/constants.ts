/**
 * The SQS backend's names, attributes and limits in one place. Queue names are pinned (operators,
 * the README and the deployed stacks rely on them): see docs/design.md, "SQS resources". A prefix
 * (`SQS_QUEUE_PREFIX`, empty by default) lets several test files or labs share one server without
 * sharing queues.
 */
export const SQS_NAMES = {
  inventoryQueue: 'inventory-orders',
  parkingQueue: 'inventory-orders-parking',
  inventoryFifoQueue: 'inventory-orders.fifo',
  parkingFifoQueue: 'inventory-orders-parking.fifo',
  /** The order service's queue for inventory results (published from inventory_outbox). */
  inventoryResultsQueue: 'orders-inventory-results',
} as const;

export interface SqsQueueNames {
  source: string;
  parking: string;
  fifo: boolean;
}

export function sqsQueueNames(prefix = '', fifo = false): SqsQueueNames {
  return fifo
    ? {
        source: `${prefix}${SQS_NAMES.inventoryFifoQueue}`,
        parking: `${prefix}${SQS_NAMES.parkingFifoQueue}`,
        fifo,
      }
    : {
        source: `${prefix}${SQS_NAMES.inventoryQueue}`,
        parking: `${prefix}${SQS_NAMES.parkingQueue}`,
        fifo,
      };
}

/** Message attributes this project sets on SQS messages (names allow `_`, not `-` first). */
export const SQS_ATTRIBUTES = {
  eventId: 'event_id',
  eventType: 'event_type',
  schemaVersion: 'schema_version',
  correlationId: 'correlation_id',
  attempt: 'retry_attempt',
  firstFailureAt: 'first_failure_at',
  /** "<count> <ISO time>": redriven from the parking lot, how often and when last. */
  redrive: 'redrive',
} as const;

/**
 * Diagnosis attributes on parked SQS messages (SQS allows at most 10 attributes per message).
 * A park writes the whole diagnosis as one JSON attribute, `diagnosis` (`SqsPackedDiagnosis`),
 * beside the identity attributes and the redrive stamp (6 at most). Messages parked before carry
 * the older layout, one attribute per field (`park_reason`, `error_class`, `error`, `consumer`,
 * `retry_attempt`, `first_failure_at`; parked at its SentTimestamp): still read.
 */
export const SQS_DIAGNOSIS = {
  /** The packed diagnosis (JSON). */
  packed: 'diagnosis',
  parkReason: 'park_reason',
  /** Not on a redriven message: its class leads `error` ("transient: …"), for the stamp's room. */
  errorClass: 'error_class',
  error: 'error',
  /** The consumer and its version. */
  consumer: 'consumer',
} as const;

/** How "retry later" is done on SQS: a visibility change, or a delayed copy. */
export type SqsRetryMode = 'visibility' | 'resend';

/** SQS's hard limits the backend works within (docs/design.md, "AWS limits"). */
export const SQS_LIMITS = {
  /** A message's total invisibility is capped at 12 hours from its first receive. */
  visibilityCapSeconds: 12 * 3600,
  /** A message delay is at most 15 minutes. */
  maxDelaySeconds: 900,
  /** Entries per batch call. */
  batchEntries: 10,
  /** Longest long poll. */
  maxWaitSeconds: 20,
} as const;

/** The safety net fires only after the application's budget is spent (+2 for crashes). */
export const SQS_DEFAULTS = {
  visibilityTimeoutSeconds: 30,
  retentionSeconds: 4 * 24 * 3600,
  receivesAboveBudget: 3,
} as const;
