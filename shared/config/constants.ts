/**
 * Names pinned by DESIGN §4, §5 and §8: operators, the README and acceptance checks rely on them.
 */
export const EVENT_TYPES = {
  orderCreated: 'order.created',
  orderCancelled: 'order.cancelled',
  reservationRejected: 'inventory.reservation_rejected',
} as const;

export const AGGREGATE_TYPES = { order: 'order' } as const;

export const PRODUCERS = {
  orderService: 'order-service',
  inventoryService: 'inventory-service',
} as const;

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

export const OUTBOX_TABLES = ['outbox', 'inventory_outbox'] as const;
export type OutboxTable = (typeof OUTBOX_TABLES)[number];

/** Which exchange each outbox's events go to. */
export const OUTBOX_EXCHANGE: Record<OutboxTable, string> = {
  outbox: RABBITMQ_NAMES.ordersExchange,
  inventory_outbox: RABBITMQ_NAMES.inventoryExchange,
};

export const SCHEMA_VERSION_HEADER = 'x-schema-version';

/**
 * The Amazon MQ event source's batching (AWS defaults: 100 messages, 500 ms): the deployed event
 * source mapping and the local trigger emulation both read it.
 */
export const AMAZON_MQ_TRIGGER = { batchSize: 100, batchWindowMs: 500 } as const;
