import { describe, expect, it } from 'vitest';
import type { Diagnosis } from '../../shared/index.js';
import { currentTraceId, encodeEnvelope, newEnvelope, newTraceId } from '../../shared/index.js';
import {
  quarantineNoticeId,
  reservationQuarantineNotice,
} from '../../shared/inventory/quarantine.js';

describe('trace ids', () => {
  it('are the X-Ray trace id of the producing Lambda invocation (_X_AMZN_TRACE_ID Root)', () => {
    const env = {
      _X_AMZN_TRACE_ID:
        'Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1',
    };
    expect(currentTraceId(env)).toBe('1-5759e988-bd862e3fe1be46a994272793');
    const e = newEnvelope({
      type: 'order.created',
      aggregate: { type: 'order', id: 'o', version: 1 },
      data: {},
      correlationId: 'c',
      producer: 'p',
      traceId: currentTraceId(env),
    });
    expect(e.trace_id).toBe('1-5759e988-bd862e3fe1be46a994272793');
  });

  it('are made in the same format where no Lambda runs', () => {
    expect(currentTraceId({})).toMatch(/^1-[0-9a-f]{8}-[0-9a-f]{24}$/);
    expect(currentTraceId({ _X_AMZN_TRACE_ID: 'garbage' })).toMatch(/^1-[0-9a-f]{8}-/);
    expect(newTraceId(Date.UTC(2026, 0, 1))).toMatch(/^1-6955b900-[0-9a-f]{24}$/);
  });
});

describe('the quarantine notice of a parked order event', () => {
  const orderId = '7d0f6d7e-1d7b-4b8e-9a55-3a1c8f2b9e01';
  const parked = (type: string, version: number) =>
    newEnvelope({
      id: 'a1b2c3d4-0000-4000-8000-000000000001',
      type,
      aggregate: { type: 'order', id: orderId, version },
      data: { orderId, sku: 'S', quantity: 1 },
      correlationId: 'corr',
      producer: 'order-service',
      traceId: '1-5759e988-bd862e3fe1be46a994272793',
    });
  const d = (over: Partial<Diagnosis> = {}): Diagnosis => ({
    messageId: 'a1b2c3d4-0000-4000-8000-000000000001',
    type: 'order.cancelled',
    schemaVersion: '1.0',
    attempts: 0,
    firstFailureAt: '2026-12-01T10:00:00.000Z',
    parkedAt: '2026-12-01T10:01:00.000Z',
    reason: 'missing_predecessor',
    errorClass: 'deferred',
    error: 'order.cancelled v2 before v1',
    correlationId: 'corr',
    traceId: '1-5759e988-bd862e3fe1be46a994272793',
    producer: 'order-service',
    origin: { queue: 'inventory.orders', exchange: 'orders', routingKey: 'order.cancelled' },
    consumer: 'inventory@test',
    ...over,
  });

  it('answers the parked event’s order version, with an id of its message id and redrive count', () => {
    const n = reservationQuarantineNotice(
      encodeEnvelope(parked('order.cancelled', 2)),
      d(),
      'consumer',
    );
    expect(n).toMatchObject({
      id: quarantineNoticeId('a1b2c3d4-0000-4000-8000-000000000001', 0),
      type: 'inventory.reservation_quarantined',
      aggregate: { type: 'reservation', id: orderId, version: 2 },
      correlation_id: 'corr',
      causation_id: 'a1b2c3d4-0000-4000-8000-000000000001',
      producer: 'inventory-service',
      trace_id: '1-5759e988-bd862e3fe1be46a994272793',
      data: {
        orderId,
        parkedEventType: 'order.cancelled',
        reason: 'missing_predecessor',
        parkedBy: 'consumer',
        redriveCount: 0,
      },
    });
    const again = reservationQuarantineNotice(
      encodeEnvelope(parked('order.cancelled', 2)),
      d({ parkedAt: '2026-12-02T00:00:00.000Z' }),
      'broker',
    );
    expect(again?.id).toBe(n?.id); // the CLI's notice of the same park is the same event
    const afterRedrive = reservationQuarantineNotice(
      encodeEnvelope(parked('order.cancelled', 2)),
      d({ redriveCount: 1, lastRedriveAt: '2026-12-02T00:00:00.000Z' }),
      'consumer',
    );
    expect(afterRedrive?.id).not.toBe(n?.id);
  });

  it('none for what names no order', () => {
    expect(reservationQuarantineNotice(Buffer.from('{not-json'), d(), 'consumer')).toBeUndefined();
    expect(
      reservationQuarantineNotice(
        encodeEnvelope(parked('inventory.reserved', 1)),
        d({ type: null }),
        'consumer',
      ),
    ).toBeUndefined();
  });
});
