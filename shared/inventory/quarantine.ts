import {
  type Diagnosis,
  type Envelope,
  newEnvelope,
  type ParkedEntry,
  type ParkNotices,
  peekEnvelope,
  uuidV5,
} from '../index.js';
import { EVENT_TYPES, PRODUCERS } from '../pipeline/constants.js';
import type { ReservationQuarantinedData } from '../pipeline/events.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ORDER_EVENTS = new Set<string>([EVENT_TYPES.orderCreated, EVENT_TYPES.orderCancelled]);

/**
 * The id of the quarantine notice of a parked message: a UUIDv5 of its message id and its redrive
 * count, so the consumer's notice and the CLI's (`parked notify`) are one event, and a message
 * parked again after a redrive gets a new one.
 */
export function quarantineNoticeId(messageId: string, redriveCount: number): string {
  return uuidV5(`${messageId}:${EVENT_TYPES.reservationQuarantined}:${redriveCount}`);
}

/**
 * `inventory.reservation_quarantined` for a parked order event, or undefined when the body names
 * no order (not JSON, no order id, not an order event): there is no order to tell, and the
 * parking lot's diagnosis is what an operator reads. Aggregate `reservation` with the order id and
 * the parked event's order version (1 for `order.created`), as inventory's other results.
 */
export function reservationQuarantineNotice(
  body: Buffer,
  d: Diagnosis,
  via: ParkedEntry['via'],
): Envelope | undefined {
  const e = peekEnvelope(body);
  const type = e.type ?? d.type ?? undefined;
  if (!type || !ORDER_EVENTS.has(type)) return undefined;
  const orderId = [e.aggregate?.id, e.data?.orderId].find(
    (v): v is string => typeof v === 'string' && UUID.test(v),
  );
  const version = e.aggregate?.version ?? (type === EVENT_TYPES.orderCreated ? 1 : undefined);
  const messageId = d.messageId ?? e.id;
  if (!orderId || !version || !messageId) return undefined;
  const redriveCount = d.redriveCount ?? 0;
  const data: ReservationQuarantinedData = {
    orderId,
    parkedEventId: messageId.slice(0, 128),
    parkedEventType: type,
    reason: d.reason,
    errorClass: d.errorClass.slice(0, 64) || 'unknown',
    error: d.error.slice(0, 256),
    parkedAt: d.parkedAt,
    firstFailureAt: d.firstFailureAt,
    attempts: Math.max(0, d.attempts),
    parkedBy: via,
    redriveCount,
  };
  return newEnvelope({
    id: quarantineNoticeId(messageId, redriveCount),
    type: EVENT_TYPES.reservationQuarantined,
    aggregate: { type: 'reservation', id: orderId, version },
    data,
    correlationId: d.correlationId ?? e.correlationId ?? messageId,
    causationId: messageId,
    producer: PRODUCERS.inventoryService,
    traceId: d.traceId ?? e.traceId,
  });
}

/** Inventory's park notices: to the results destination, as its other results (the relay's `inventory_outbox` stream). */
export const INVENTORY_PARK_NOTICES: ParkNotices = {
  stream: 'inventory_outbox',
  build: reservationQuarantineNotice,
};
