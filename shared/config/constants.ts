/**
 * Names pinned by the design (docs/design.md): operators, the README and the deployed stacks rely
 * on them. Each backend's own names are in its `constants.ts`.
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

export const OUTBOX_TABLES = ['outbox', 'inventory_outbox'] as const;
export type OutboxTable = (typeof OUTBOX_TABLES)[number];
