import { describe, expect, it } from 'vitest';
import { HttpError } from '../../shared/http/errors.js';
import { loadEnv } from '../../shared/index.js';
import { parsePlaceOrderBody } from '../../shared/orders/validation.js';
import { backoffDelay } from '../../shared/util/async.js';

describe('parsePlaceOrderBody', () => {
  it('accepts a valid body and ignores unknown fields', () => {
    expect(parsePlaceOrderBody({ sku: 'SKU-1', quantity: 2, note: 'x' })).toEqual({
      sku: 'SKU-1',
      quantity: 2,
    });
  });
  it.each([
    [{ quantity: 1 }, 'sku', 'sku: is required'],
    [{ sku: 'a', quantity: -1 }, 'quantity', 'quantity: must be at least 1'],
    [{ sku: 'a', quantity: 10_001 }, 'quantity', 'quantity: must be at most 10000'],
    [{ sku: 'a', quantity: 1, orderId: 12 }, 'orderId', 'orderId: must be a UUID'],
  ])('%j → 400 on %s', (body, field, message) => {
    try {
      parsePlaceOrderBody(body);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(HttpError);
      expect(err).toMatchObject({ statusCode: 400, field, message });
    }
  });
});

describe('backoffDelay', () => {
  it('grows exponentially with full jitter inside [exp/2, exp] and is capped', () => {
    expect(backoffDelay(1, 100, 10_000, () => 0)).toBe(50);
    expect(backoffDelay(1, 100, 10_000, () => 1)).toBe(100);
    expect(backoffDelay(4, 100, 10_000, () => 1)).toBe(800);
    expect(backoffDelay(30, 100, 10_000, () => 1)).toBe(10_000);
  });
});

describe('loadEnv', () => {
  it('has the pinned defaults', () => {
    expect(loadEnv({})).toMatchObject({
      DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/test',
      AMQP_URL: 'amqp://guest:guest@127.0.0.1:5672',
      RABBITMQ_MANAGEMENT_URL: 'http://guest:guest@127.0.0.1:15672',
      PORT: 3000,
    });
  });
  it('names the bad variable', () => {
    expect(() => loadEnv({ RELAY_BATCH_SIZE: '0' })).toThrow(/RELAY_BATCH_SIZE/);
  });
});
