import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import type { Envelope } from '../../shared/index.js';
import { InventoryRig } from '../helpers/inventory.js';

describe('reserve inventory on RabbitMQ under load', () => {
  let b: InventoryRig;
  beforeAll(async () => {
    b = await InventoryRig.create('reserve_load');
  });
  afterAll(() => b?.close());

  it('two consumers, 1,000 orders with 5 % delivered twice → reserved totals exact, stock never negative', async () => {
    const skus = ['SKU-1', 'SKU-2', 'SKU-3', 'SKU-4'];
    for (const sku of skus) await b.stock(sku, 300);
    const orders: Envelope[] = Array.from({ length: 1_000 }, (_, i) =>
      b.orderCreated(skus[i % 4] as string, 1 + (i % 3)),
    );
    const duplicated = orders.filter((_, i) => i % 20 === 7); // 50 orders, 5 %
    await Promise.all([b.worker({ prefetch: 16 }), b.worker({ prefetch: 16 })]);
    // duplicates interleaved: some arrive right after their original, some much later
    await b.publish(
      ...orders.slice(0, 500),
      ...duplicated.slice(0, 25),
      ...orders.slice(500),
      ...duplicated.slice(25),
    );

    await waitFor(
      async () => {
        const { rows } = await b.t.db.query<{ n: string }>(
          'SELECT count(*) AS n FROM processed_messages',
        );
        return Number(rows[0]?.n) === 1_000;
      },
      { timeoutMs: 60_000, message: '1,000 inbox rows' },
    );
    await waitFor(() => b.lines.filter((l) => l.step === 'acked').length === 1_050, {
      timeoutMs: 30_000,
      message: '1,050 acks',
    });

    const { rows: stock } = await b.t.db.query<{
      sku: string;
      available: number;
      reserved: number;
      sum: number;
    }>(
      `SELECT s.sku, s.available, s.reserved,
              coalesce((SELECT sum(quantity) FROM reservations r WHERE r.sku = s.sku AND r.status = 'reserved'), 0)::int AS sum
         FROM stock s ORDER BY s.sku`,
    );
    for (const s of stock) {
      expect(s.reserved).toBe(s.sum); // exactly the distinct reserved orders
      expect(s.reserved).toBeLessThanOrEqual(s.available);
      expect(s.reserved).toBeGreaterThan(290); // demand exceeds stock: nearly all of it was taken
    }
    const { rows: counts } = await b.t.db.query<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM reservations GROUP BY status ORDER BY status',
    );
    const total = counts.reduce((s, c) => s + c.n, 0);
    expect(total).toBe(1_000);
    const rejected = counts.find((c) => c.status === 'rejected')?.n ?? 0;
    expect(rejected).toBeGreaterThan(0);
    const { rows: events } = await b.t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM inventory_outbox
        WHERE event_type = 'inventory.reservation_rejected'`,
    );
    expect(events[0]?.n).toBe(rejected); // one rejection event per rejected order, none twice
    expect(b.lines.filter((l) => l.step === 'duplicate')).toHaveLength(50);
    expect(await b.parkedCount()).toBe(0);
  });
});
