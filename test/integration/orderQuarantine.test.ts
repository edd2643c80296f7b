import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Diagnosis, InboundMessage } from '../../shared/index.js';
import { encodeEnvelope, newEnvelope } from '../../shared/index.js';
import {
  quarantineNoticeId,
  reservationQuarantineNotice,
} from '../../shared/inventory/quarantine.js';
import { OrderResults } from '../../shared/orders/OrderResults.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

/**
 * How the order side applies `inventory.reservation_quarantined` beside inventory's decisions, on
 * the real database: a quarantine shows over `pending`; a decision for the same order version
 * (a redrive's result) replaces it; a late quarantine never replaces a decision; of two
 * quarantines of one version the later park shows; duplicates change nothing.
 */
describe('order results: quarantine notices', () => {
  let t: TestDatabase;
  let orders: OrderService;
  let results: OrderResults;
  beforeAll(async () => {
    t = await createTestDatabase('order_quarantine');
    orders = new OrderService({ db: t.db });
    results = new OrderResults({ db: t.db });
  });
  afterAll(() => t?.drop());

  const inbound = (e: ReturnType<typeof newEnvelope>): InboundMessage => ({
    messageId: e.id,
    body: encodeEnvelope(e),
    attempt: 0,
    redelivered: false,
    type: e.type,
  });
  const apply = async (...events: ReturnType<typeof newEnvelope>[]) =>
    (await results.process(events.map(inbound))).map((o) => (o.kind === 'ack' ? o.result : o.kind));

  const diagnosis = (messageId: string, parkedAt: string, redriveCount = 0): Diagnosis => ({
    messageId,
    type: 'order.created',
    schemaVersion: '1.0',
    attempts: 3,
    firstFailureAt: '2026-12-01T10:00:00.000Z',
    parkedAt,
    reason: 'exhausted',
    errorClass: 'transient',
    error: 'connect ECONNREFUSED',
    correlationId: 'c-q',
    traceId: null,
    producer: 'order-service',
    origin: { queue: 'inventory.orders', exchange: 'orders', routingKey: 'order.created' },
    consumer: 'inventory@test',
    ...(redriveCount ? { redriveCount, lastRedriveAt: '2026-12-01T11:00:00.000Z' } : {}),
  });

  const orderCreated = (orderId: string, id: string) =>
    newEnvelope({
      id,
      type: 'order.created',
      aggregate: { type: 'order', id: orderId, version: 1 },
      data: { orderId, sku: 'SKU-1', quantity: 1 },
      correlationId: 'c-q',
      producer: 'order-service',
    });
  const notice = (orderId: string, eventId: string, parkedAt: string, redriveCount = 0) => {
    const n = reservationQuarantineNotice(
      encodeEnvelope(orderCreated(orderId, eventId)),
      diagnosis(eventId, parkedAt, redriveCount),
      'consumer',
    );
    if (!n) throw new Error('no notice');
    return n;
  };
  const reserved = (orderId: string, causation: string) =>
    newEnvelope({
      id: randomUUID(),
      type: 'inventory.reserved',
      aggregate: { type: 'reservation', id: orderId, version: 1 },
      data: { orderId, sku: 'SKU-1', quantity: 1 },
      correlationId: 'c-q',
      causationId: causation,
      producer: 'inventory-service',
    });

  it('quarantined over pending; replaced by the same version’s decision; never over a decision', async () => {
    const { orderId, eventId } = await orders.place({
      sku: 'SKU-1',
      quantity: 1,
      correlationId: 'c-q',
    });
    const q0 = notice(orderId, eventId, '2026-12-01T10:00:06.000Z');
    expect(q0.id).toBe(quarantineNoticeId(eventId, 0));
    expect(q0.aggregate).toEqual({ type: 'reservation', id: orderId, version: 1 });
    expect(await apply(q0)).toEqual(['applied']);
    expect((await orders.get(orderId)).reservation).toEqual({
      status: 'quarantined',
      reason: 'exhausted (transient): connect ECONNREFUSED',
      parkedAt: '2026-12-01T10:00:06.000Z',
    });
    expect(await apply(q0)).toEqual(['duplicate']);

    // parked again after a redrive: the later park shows; an earlier one arriving late does not
    const q1 = notice(orderId, eventId, '2026-12-01T11:00:06.000Z', 1);
    expect(q1.id).not.toBe(q0.id);
    const late = notice(orderId, eventId, '2026-12-01T09:00:00.000Z', 2);
    expect(await apply(q1, late)).toEqual(['applied', 'stale']);
    expect((await orders.get(orderId)).reservation.parkedAt).toBe('2026-12-01T11:00:06.000Z');

    // the redriven event's result, for the same order version, replaces the quarantine
    expect(await apply(reserved(orderId, eventId))).toEqual(['applied']);
    expect((await orders.get(orderId)).reservation).toEqual({ status: 'reserved', reason: null });

    // a late quarantine (another park's notice) never replaces the decision
    expect(await apply(notice(orderId, eventId, '2026-12-01T12:00:00.000Z', 3))).toEqual(['stale']);
    expect((await orders.get(orderId)).reservation).toEqual({ status: 'reserved', reason: null });
  });

  it('in one batch too: a decision and a quarantine of the same version, in either order, end decided', async () => {
    for (const order of ['decision first', 'quarantine first'] as const) {
      const { orderId, eventId } = await orders.place({
        sku: 'SKU-1',
        quantity: 1,
        correlationId: 'c-q',
      });
      const q = notice(orderId, eventId, '2026-12-01T10:00:06.000Z');
      const r = reserved(orderId, eventId);
      const outcomes = await apply(...(order === 'decision first' ? [r, q] : [q, r]));
      expect(outcomes, order).toEqual(
        order === 'decision first' ? ['applied', 'stale'] : ['stale', 'applied'],
      );
      expect((await orders.get(orderId)).reservation, order).toEqual({
        status: 'reserved',
        reason: null,
      });
    }
  });

  it('no notice for a body that names no order', () => {
    const d = diagnosis(randomUUID(), '2026-12-01T10:00:06.000Z');
    expect(reservationQuarantineNotice(Buffer.from('{not-json'), d, 'consumer')).toBeUndefined();
    expect(
      reservationQuarantineNotice(
        Buffer.from(JSON.stringify({ type: 'order.created' })),
        d,
        'broker',
      ),
    ).toBeUndefined();
  });
});
