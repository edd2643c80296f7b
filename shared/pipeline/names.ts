import { EVENT_TYPES, type OutboxTable } from './constants.js';

/**
 * The names the example's topology (`PIPELINE_TOPOLOGY`) derives on each broker, pinned here for
 * what reads them without a backend: the stacks, the operators' commands, the lab and the tests.
 * A unit test holds them to the derivation (test/unit/topology.test.ts).
 */

/** On RabbitMQ (docs/design.md, "RabbitMQ topology"). */
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
  /**
   * `orders.inventory-results` dead-letters here (its delivery limit): the results parking lot,
   * behind an exchange of its own so it never mixes with inventory's parking.
   */
  resultsParkingExchange: 'orders.inventory-results.dlx',
  resultsParkingQueue: 'orders.inventory-results.parking',
  resultsParkingRoutingKey: 'orders.inventory-results.parking',
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

/**
 * On SQS (docs/design.md, "SQS resources"). A prefix (`SQS_QUEUE_PREFIX`, empty by default) lets
 * several test files or labs share one server without sharing queues.
 */
export const SQS_NAMES = {
  inventoryQueue: 'inventory-orders',
  parkingQueue: 'inventory-orders-parking',
  inventoryFifoQueue: 'inventory-orders.fifo',
  parkingFifoQueue: 'inventory-orders-parking.fifo',
  /** The order service's queue for inventory results (published from inventory_outbox). */
  inventoryResultsQueue: 'orders-inventory-results',
} as const;
