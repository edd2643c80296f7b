/**
 * Names pinned by the example pipeline's design (docs/design.md): operators, the README and the
 * deployed stacks rely on them. Each backend's own names are in its `constants.ts`.
 */
export const EVENT_TYPES = {
  orderCreated: 'order.created',
  orderCancelled: 'order.cancelled',
  reservationRejected: 'inventory.reservation_rejected',
  /** Stock was reserved for an order (inventory's answer to `order.created`). */
  reserved: 'inventory.reserved',
  /** A cancelled order's reserved stock was released. */
  released: 'inventory.released',
  /**
   * Inventory parked the order's event (it decides nothing until an operator redrives it): the
   * order shows `quarantined` with the reason, instead of `pending` for ever.
   */
  reservationQuarantined: 'inventory.reservation_quarantined',
} as const;

export const AGGREGATE_TYPES = { order: 'order' } as const;

export const PRODUCERS = {
  orderService: 'order-service',
  inventoryService: 'inventory-service',
} as const;

export const OUTBOX_TABLES = ['outbox', 'inventory_outbox'] as const;
export type OutboxTable = (typeof OUTBOX_TABLES)[number];

/**
 * The sides of the pipeline that reach a database, each with a login of its own (the services'
 * `*_roles` migrations): the order service (place-order, order-results) in its database,
 * inventory (reserve-inventory) in its own, the outbox relay and maintenance in both. migrate runs
 * as the master user; broker-setup has no database.
 */
export const DB_SIDES = ['orders', 'inventory', 'relay', 'maintenance'] as const;
export type DbSide = (typeof DB_SIDES)[number];
