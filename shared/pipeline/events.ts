import { z } from 'zod';
import { EVENT_TYPES } from './constants.js';

/**
 * The `data` schema of every event type, per schema major version. Consumers validate incoming
 * data against these (a violation is a permanent error); `contracts/` holds their committed JSON
 * Schemas, and a test refuses incompatible changes. Unknown fields are tolerated.
 */
const orderLine = {
  orderId: z.uuid(),
  sku: z.string().min(1).max(64),
  quantity: z.number().int().min(1),
};

export const orderCreatedV1 = z.looseObject({ ...orderLine });
export const orderCancelledV1 = z.looseObject({ ...orderLine });
export const reservationRejectedV1 = z.looseObject({
  ...orderLine,
  reason: z.enum(['out_of_stock', 'unknown_sku']),
  /** Units that were free when the order was refused. */
  available: z.number().int().min(0),
});

/** Stock was reserved for the order (its `aggregate.version` is the order's). */
export const reservedV1 = z.looseObject({ ...orderLine });
/** A cancelled order's reservation was released (the stock is free again). */
export const releasedV1 = z.looseObject({ ...orderLine });

/**
 * Inventory parked the order's event (`aggregate.version`: the parked event's order version): no
 * decision comes until an operator fixed the cause and redrove it. What the order shows meanwhile.
 */
export const reservationQuarantinedV1 = z.looseObject({
  orderId: z.uuid(),
  /** The parked message's id and event type. */
  parkedEventId: z.string().min(1).max(128),
  parkedEventType: z.string().min(1).max(128),
  reason: z.enum(['permanent', 'exhausted', 'max_age', 'missing_predecessor']),
  errorClass: z.string().min(1).max(64),
  /** A short error text, never the payload. */
  error: z.string().max(256),
  parkedAt: z.iso.datetime({ offset: true }),
  firstFailureAt: z.iso.datetime({ offset: true }),
  attempts: z.number().int().min(0),
  /** Parked by the consumer, or dead-lettered by the broker (found by `parked notify`). */
  parkedBy: z.enum(['consumer', 'broker']),
  /** Times the event was redriven before this park. */
  redriveCount: z.number().int().min(0),
});

export const EVENT_DATA_SCHEMAS = {
  [EVENT_TYPES.orderCreated]: { 1: orderCreatedV1 },
  [EVENT_TYPES.orderCancelled]: { 1: orderCancelledV1 },
  [EVENT_TYPES.reservationRejected]: { 1: reservationRejectedV1 },
  [EVENT_TYPES.reserved]: { 1: reservedV1 },
  [EVENT_TYPES.released]: { 1: releasedV1 },
  [EVENT_TYPES.reservationQuarantined]: { 1: reservationQuarantinedV1 },
} as const satisfies Record<string, Record<number, z.ZodType>>;

export type EventType = keyof typeof EVENT_DATA_SCHEMAS;
export type OrderCreatedData = z.infer<typeof orderCreatedV1>;
export type OrderCancelledData = z.infer<typeof orderCancelledV1>;
export type ReservationRejectedData = z.infer<typeof reservationRejectedV1>;
export type ReservedData = z.infer<typeof reservedV1>;
export type ReleasedData = z.infer<typeof releasedV1>;
export type ReservationQuarantinedData = z.infer<typeof reservationQuarantinedV1>;

export function dataSchemaFor(type: string, major: number): z.ZodType | undefined {
  const byVersion = (EVENT_DATA_SCHEMAS as Record<string, Record<number, z.ZodType>>)[type];
  return byVersion?.[major];
}
