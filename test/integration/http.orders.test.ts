import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startHttpApi } from '../../devkit/emulators/httpApi.js';
import { createPlaceOrderHandler, MAX_BODY_BYTES } from '../../functions/place-order/handler.js';
import { setFaults } from '../../shared/config/faults.js';
import { createLogger } from '../../shared/index.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

describe('orders HTTP API (place-order handler behind the local API Gateway emulation)', () => {
  let t: TestDatabase;
  let api: Awaited<ReturnType<typeof startHttpApi>>;

  beforeAll(async () => {
    t = await createTestDatabase('http_orders');
    const handler = createPlaceOrderHandler({
      orders: new OrderService({ db: t.db }),
      logger: createLogger('place-order-test'),
    });
    api = await startHttpApi(handler, { port: 0 });
  });
  afterAll(async () => {
    await api?.close();
    await t?.drop();
  });
  afterEach(() => setFaults(''));

  const post = (path: string, body?: unknown, headers: Record<string, string> = {}) =>
    fetch(`${api.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });

  const counts = async () => {
    const { rows } = await t.db.query<{ orders: string; events: string }>(
      'SELECT (SELECT count(*) FROM orders) AS orders, (SELECT count(*) FROM outbox) AS events',
    );
    return { orders: Number(rows[0]?.orders), events: Number(rows[0]?.events) };
  };

  it('POST /orders → 201 {orderId, eventId}; the order and its order.created event commit together', async () => {
    const res = await post(
      '/orders',
      { sku: 'sku-1', quantity: 3 },
      { 'x-correlation-id': 'corr-http-1' },
    );
    expect(res.status).toBe(201);
    expect(res.headers.get('x-correlation-id')).toBe('corr-http-1');
    const body = (await res.json()) as { orderId: string; eventId: string };

    const { rows } = await t.db.query(
      `SELECT o.status, o.version, e.event_type, e.aggregate_version, e.payload, e.correlation_id, e.published_at
         FROM orders o JOIN outbox e ON e.id = o.created_event_id WHERE o.id = $1`,
      [body.orderId],
    );
    expect(rows).toEqual([
      {
        status: 'placed',
        version: 1,
        event_type: 'order.created',
        aggregate_version: 1,
        payload: { orderId: body.orderId, sku: 'sku-1', quantity: 3 },
        correlation_id: 'corr-http-1',
        published_at: null,
      },
    ]);
  });

  it('the same orderId twice → the same order and event, no second event', async () => {
    const orderId = randomUUID();
    const first = await post('/orders', { sku: 'sku-2', quantity: 1, orderId });
    const second = await post('/orders', { sku: 'sku-2', quantity: 1, orderId });
    expect(first.status).toBe(201);
    expect(second.status).toBe(200);
    expect(await second.json()).toEqual(await first.json());
    const { rows } = await t.db.query('SELECT id FROM outbox WHERE aggregate_id = $1', [orderId]);
    expect(rows).toHaveLength(1);
  });

  it('concurrent requests with the same orderId create one order and one event', async () => {
    const orderId = randomUUID();
    const responses = await Promise.all(
      Array.from({ length: 8 }, () => post('/orders', { sku: 'sku-3', quantity: 2, orderId })),
    );
    expect(responses.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    const eventIds = new Set(
      await Promise.all(
        responses.map(async (r) => ((await r.json()) as { eventId: string }).eventId),
      ),
    );
    expect(eventIds.size).toBe(1);
    const { rows } = await t.db.query('SELECT id FROM outbox WHERE aggregate_id = $1', [orderId]);
    expect(rows).toHaveLength(1);
  });

  it('the same orderId with a different quantity → 409 naming the field, nothing written', async () => {
    const orderId = randomUUID();
    await post('/orders', { sku: 'sku-4', quantity: 1, orderId });
    const before = await counts();
    const res = await post('/orders', { sku: 'sku-4', quantity: 5, orderId });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ error: 'Conflict', field: 'quantity' });
    expect(await counts()).toEqual(before);
  });

  const invalid: [string, number, string, () => Promise<Response>][] = [
    ['missing sku', 400, 'sku', () => post('/orders', { quantity: 1 })],
    ['missing quantity', 400, 'quantity', () => post('/orders', { sku: 'a' })],
    ['negative quantity', 400, 'quantity', () => post('/orders', { sku: 'a', quantity: -2 })],
    ['zero quantity', 400, 'quantity', () => post('/orders', { sku: 'a', quantity: 0 })],
    ['fractional quantity', 400, 'quantity', () => post('/orders', { sku: 'a', quantity: 1.5 })],
    ['quantity as a string', 400, 'quantity', () => post('/orders', { sku: 'a', quantity: '2' })],
    ['sku as a number', 400, 'sku', () => post('/orders', { sku: 42, quantity: 1 })],
    ['empty sku', 400, 'sku', () => post('/orders', { sku: '', quantity: 1 })],
    ['sku with spaces', 400, 'sku', () => post('/orders', { sku: 'a b', quantity: 1 })],
    [
      'orderId not a UUID',
      400,
      'orderId',
      () => post('/orders', { sku: 'a', quantity: 1, orderId: 'x' }),
    ],
    ['a JSON array', 400, 'body', () => post('/orders', [1, 2])],
    ['JSON null', 400, 'body', () => post('/orders', 'null')],
    ['malformed JSON', 400, 'body', () => post('/orders', '{"sku": "a", ')],
    ['no body', 400, 'body', () => post('/orders')],
    [
      'non-JSON content type',
      415,
      'body',
      () =>
        fetch(`${api.url}/orders`, {
          method: 'POST',
          headers: { 'content-type': 'text/plain' },
          body: 'sku=a',
        }),
    ],
    [
      'oversized body',
      413,
      'body',
      () => post('/orders', { sku: 'a', quantity: 1, padding: 'x'.repeat(MAX_BODY_BYTES) }),
    ],
  ];

  it.each(invalid)('%s → %i naming "%s", nothing written', async (_name, status, field, send) => {
    const before = await counts();
    const res = await send();
    expect(res.status).toBe(status);
    const body = (await res.json()) as { field: string; message: string };
    expect(body.field).toBe(field);
    expect(body.message).toMatch(new RegExp(`^${field}`));
    expect(await counts()).toEqual(before);
  });

  it('POST /orders/{id}/cancel writes order.cancelled with the next version; cancelling again writes nothing', async () => {
    const { orderId } = (await (await post('/orders', { sku: 'sku-5', quantity: 1 })).json()) as {
      orderId: string;
    };
    const first = await post(`/orders/${orderId}/cancel`);
    expect(first.status).toBe(200);
    expect(await first.json()).toMatchObject({ orderId, cancelled: true });
    const again = await post(`/orders/${orderId}/cancel`);
    expect(await again.json()).toMatchObject({ orderId, cancelled: false, eventId: null });

    const { rows } = await t.db.query<{ event_type: string; aggregate_version: number }>(
      'SELECT event_type, aggregate_version FROM outbox WHERE aggregate_id = $1 ORDER BY aggregate_version',
      [orderId],
    );
    expect(rows).toEqual([
      { event_type: 'order.created', aggregate_version: 1 },
      { event_type: 'order.cancelled', aggregate_version: 2 },
    ]);
    const view = await (await fetch(`${api.url}/orders/${orderId}`)).json();
    expect(view).toMatchObject({ orderId, status: 'cancelled', version: 2 });
  });

  it('GET /orders/{id} returns the order with its reservation status', async () => {
    const { orderId } = (await (await post('/orders', { sku: 'sku-6', quantity: 4 })).json()) as {
      orderId: string;
    };
    const res = await fetch(`${api.url}/orders/${orderId}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      orderId,
      sku: 'sku-6',
      quantity: 4,
      status: 'placed',
      version: 1,
      reservation: { status: 'pending', reason: null },
    });
  });

  it('unknown orders → 404; a malformed id → 400 naming orderId; an unknown route → 404', async () => {
    expect((await fetch(`${api.url}/orders/${randomUUID()}`)).status).toBe(404);
    expect((await post(`/orders/${randomUUID()}/cancel`)).status).toBe(404);
    const bad = await fetch(`${api.url}/orders/not-a-uuid`);
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ field: 'orderId' });
    expect((await fetch(`${api.url}/nope`)).status).toBe(404);
  });

  it('order.after-outbox-insert:throw → 500 and neither the order nor the event is in the database', async () => {
    setFaults('order.after-outbox-insert:throw');
    const before = await counts();
    const orderId = randomUUID();
    const res = await post('/orders', { sku: 'sku-7', quantity: 1, orderId });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: 'InternalError', message: 'internal error' });
    expect(await counts()).toEqual(before);
    const { rows } = await t.db.query('SELECT 1 FROM orders WHERE id = $1', [orderId]);
    expect(rows).toHaveLength(0);
  });
});
