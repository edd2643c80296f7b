import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpApi } from '../../devkit/emulators/httpApi.js';
import { createPlaceOrderHandler } from '../../functions/place-order/handler.js';
import { RESUMING_RETRY_AFTER_S } from '../../shared/http/errors.js';
import { createLogger } from '../../shared/index.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { localDataApi } from '../helpers/dataApi.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

/** The orders HTTP API on the RDS Data API adapter (local endpoint, real SDK client). */
describe('orders HTTP API through the RDS Data API', () => {
  let t: TestDatabase;
  let data: Awaited<ReturnType<typeof localDataApi>>;
  let api: Awaited<ReturnType<typeof startHttpApi>>;

  beforeAll(async () => {
    t = await createTestDatabase('data_api_http');
    data = await localDataApi(t.url, t.name);
    const handler = createPlaceOrderHandler({
      orders: new OrderService({ db: data.db }),
      logger: createLogger('place-order-test'),
    });
    api = await startHttpApi(handler, { port: 0 });
  });
  afterAll(async () => {
    await api?.close();
    await data?.close();
    await t?.drop();
  });

  const place = (orderId: string, correlationId: string) =>
    fetch(`${api.url}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-correlation-id': correlationId },
      body: JSON.stringify({ orderId, sku: 'SKU-DAH', quantity: 1 }),
    });

  const stored = async (orderId: string) => {
    const { rows } = await t.db.query<{ order_corr: string; event_corr: string }>(
      `SELECT o.correlation_id AS order_corr, e.correlation_id AS event_corr
         FROM orders o JOIN outbox e ON e.id = o.created_event_id WHERE o.id = $1`,
      [orderId],
    );
    return rows[0];
  };

  it.each([
    '2024-13-45T99:99:99Z', // timestamp-shaped, not a date: was a RangeError (500)
    '2024-06-01T12:00:00.123456Z', // a valid timestamp: was rewritten (space, ms precision)
    'ABCDEF01-2345-6789-ABCD-EF0123456789', // an upper-case UUID: was lower-cased
  ])('a correlation id %s gives 201 and is stored unchanged', async (correlationId) => {
    const orderId = randomUUID();
    const res = await place(orderId, correlationId);
    expect(res.status).toBe(201);
    expect(await stored(orderId)).toEqual({ order_corr: correlationId, event_corr: correlationId });
  });

  it('while Aurora resumes: 503 with Retry-After, nothing written; the same request then succeeds', async () => {
    const orderId = randomUUID();
    data.server.setResuming(true);
    try {
      const res = await place(orderId, 'resuming-1');
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe(String(RESUMING_RETRY_AFTER_S));
      expect(await res.json()).toMatchObject({ error: 'ServiceUnavailable' });
    } finally {
      data.server.setResuming(false);
    }
    expect(await stored(orderId)).toBeUndefined();
    const again = await place(orderId, 'resuming-1');
    expect(again.status).toBe(201);
    expect(await stored(orderId)).toEqual({ order_corr: 'resuming-1', event_corr: 'resuming-1' });
  });
});
