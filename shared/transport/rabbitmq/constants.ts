import { EVENT_TYPES, type OutboxTable } from '../../config/constants.js';

/**
 * The RabbitMQ backend's names and defaults in one place. The names are pinned (operators, the
 * README and the deployed stacks rely on them): see docs/design.md, "RabbitMQ topology".
 */
export const RABBITMQ_NAMES = {
  /** Order events (topic). */
  ordersExchange: 'orders',
  /** Inventory's consumer queue for order events. */
  inventoryQueue: 'inventory.orders',
  /** A second consumer of every order event, to prove retries never copy into other queues. */
  auditQueue: 'audit.orders',
  /** Inventory results (topic), published from `inventory_outbox`. */
  inventoryExchange: 'inventory',
  /** The order service's queue for inventory results. */
  inventoryResultsQueue: 'orders.inventory-results',
} as const;

export const RETRY_NAMES = {
  /** Retry copies are published here with the delay (ms) as routing key. */
  retryExchange: 'inventory.orders.retry',
  /** Retry queues dead-letter here when their TTL expires; bound only to inventory.orders. */
  requeueExchange: 'inventory.orders.requeue',
  requeueRoutingKey: 'inventory.orders',
  /** inventory.orders dead-letters (and the consumer parks) here. */
  parkingExchange: 'inventory.orders.dlx',
  parkingQueue: 'inventory.orders.parking',
  parkingRoutingKey: 'inventory.orders.parking',
} as const;

/** The retry queue of one delay bucket. */
export const retryQueueName = (delayMs: number) => `${RETRY_NAMES.retryExchange}.${delayMs}`;

/** The event types inventory consumes, as routing keys of `inventory.orders`. */
export const INVENTORY_ROUTING_KEYS = [EVENT_TYPES.orderCreated, EVENT_TYPES.orderCancelled];

/** Which exchange each outbox's events go to (a stream of the transport port). */
export const OUTBOX_EXCHANGE: Record<OutboxTable, string> = {
  outbox: RABBITMQ_NAMES.ordersExchange,
  inventory_outbox: RABBITMQ_NAMES.inventoryExchange,
};

/** The envelope's schema version travels in this header (and in the body). */
export const SCHEMA_VERSION_HEADER = 'x-schema-version';

/** Headers this project sets on messages (x-death is the broker's). */
export const HEADERS = {
  attempt: 'x-retry-attempt',
  lastError: 'x-last-error',
  errorClass: 'x-error-class',
  firstFailureAt: 'x-first-failure-at',
  parkedAt: 'x-parked-at',
  parkReason: 'x-park-reason',
  consumer: 'x-consumer',
  schemaVersion: SCHEMA_VERSION_HEADER,
  redrivenAt: 'x-redriven-at',
  redriveCount: 'x-redrive-count',
} as const;

/** Longest error text carried in a header. */
export const MAX_ERROR_HEADER = 256;

/**
 * The Amazon MQ event source's batching (AWS defaults: 100 messages, 500 ms): the deployed event
 * source mapping and the local trigger emulation both read it.
 */
export const AMAZON_MQ_TRIGGER = { batchSize: 100, batchWindowMs: 500 } as const;

/** Defaults of the RabbitMQ backend, each used in one place only. */
export const RABBITMQ_DEFAULTS = {
  /**
   * Unacknowledged deliveries per worker channel (never 0, which would mean unlimited), and so the
   * largest batch in one transaction: as large as the Amazon MQ trigger's batch. Measured: with
   * 16, one worker at 500 orders/s on a loaded 2-core machine committed at most 16 messages per
   * transaction, close to the offered rate, and the queue grew (end-to-end p99 700–830 ms;
   * 140–180 ms with 100).
   */
  prefetch: AMAZON_MQ_TRIGGER.batchSize,
  /** Quorum-queue deliveries of one message before the broker dead-letters it itself. */
  deliveryLimit: 10,
  /** Policy priority: above Amazon MQ's AWS-DEFAULT-POLICY-* so ours is the one that applies. */
  policyPriority: 10,
  /** Confirms awaited at once by a publisher. */
  publishWindow: 1_000,
  confirmTimeoutMs: 10_000,
  connectTimeoutMs: 5_000,
  /** Reconnect backoff (connection recovery and a worker's channel): base·2^(n−1), capped. */
  reconnectBaseMs: 200,
  reconnectMaxMs: 5_000,
} as const;
