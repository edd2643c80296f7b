import type { Topology } from '../index.js';
import { EVENT_TYPES } from './constants.js';

/**
 * The example pipeline's streams and subscriptions, as every backend of it is built: the names the
 * stacks, the operators' commands and the docs use (docs/design.md, "Topology").
 * - `outbox` (order events) goes to `orders`; inventory reads `order.created` and
 *   `order.cancelled` from `inventory.orders`, with the retry ladder and its parking lot;
 *   `audit.orders` stands for another team's consumer of every order event.
 * - `inventory_outbox` (inventory's results) goes to `inventory`; the order side reads them from
 *   `orders.inventory-results`, given back until the broker's delivery limit.
 */
export const PIPELINE_TOPOLOGY = {
  streams: { outbox: 'orders', inventory_outbox: 'inventory' },
  subscriptions: {
    inventory: {
      queue: 'inventory.orders',
      stream: 'outbox',
      types: [EVENT_TYPES.orderCreated, EVENT_TYPES.orderCancelled],
      failures: 'retries',
    },
    results: {
      queue: 'orders.inventory-results',
      stream: 'inventory_outbox',
      types: ['inventory.#'],
      failures: 'redelivery',
    },
  },
  taps: [{ queue: 'audit.orders', stream: 'outbox', types: ['order.#'] }],
} as const satisfies Topology;
