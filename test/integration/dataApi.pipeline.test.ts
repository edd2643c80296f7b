import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConsumer } from '../../devkit/consumers.js';
import { waitFor } from '../../devkit/waitFor.js';
import type { DataApiDatabase } from '../../shared/db/data-api/DataApiDatabase.js';
import { OutboxRelay } from '../../shared/index.js';
import { OrderResults } from '../../shared/orders/OrderResults.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { localDataApi } from '../helpers/dataApi.js';
import { InventoryRig } from '../helpers/inventory.js';

describe('the pipeline through the RDS Data API adapter (local endpoint, real SDK client)', () => {
  let b: InventoryRig;
  let api: Awaited<ReturnType<typeof localDataApi>>;
  let db: DataApiDatabase;
  beforeAll(async () => {
    b = await InventoryRig.create('data_api_pipeline');
    api = await localDataApi(b.t.url, b.t.name);
    db = api.db;
  });
  afterAll(async () => {
    await b?.close();
    await api?.close();
  });

  it('places orders, relays them, reserves once each even when delivered twice', async () => {
    await b.stock('SKU-DA', 5);
    const orders = new OrderService({ db });
    const placed: Awaited<ReturnType<OrderService['place']>>[] = [];
    for (const quantity of [1, 2, 3])
      placed.push(await orders.place({ sku: 'SKU-DA', quantity, correlationId: 'data-api' }));
    const again = await orders.place({
      sku: 'SKU-DA',
      quantity: 1,
      orderId: placed[0]?.orderId,
      correlationId: 'data-api',
    });
    expect(again).toMatchObject({ created: false, eventId: placed[0]?.eventId });

    const relay = new OutboxRelay(
      { db, publisher: b.backend.publisher('outbox') },
      { table: 'outbox', batchSize: 100, maxAttempts: 5 },
    );
    expect(await relay.runOnce()).toMatchObject({ claimed: 3, published: 3 });
    await b.t.db.query('UPDATE outbox SET published_at = NULL'); // publish them all a second time
    expect(await relay.runOnce()).toMatchObject({ published: 3 });

    await b.worker({ db });
    for (const p of placed) await b.waitForLine(p.eventId, 'acked', 2);
    // 1 + 2 reserved, 3 rejected (only 2 left): each decided once
    expect(await b.stockOf('SKU-DA')).toEqual({ available: 5, reserved: 3 });
    expect(b.lines.filter((l) => l.step === 'duplicate')).toHaveLength(3);

    // The order side hears the results (through the Data API too) and shows them.
    const results = new OrderResults({ db, journal: b.journal });
    await startConsumer(b.backend, (m) => results.process(m), {
      mode: 'worker',
      queue: 'results',
      journal: b.journal,
    });
    const inventoryRelay = new OutboxRelay(
      { db, publisher: b.backend.publisher('inventory_outbox') },
      { table: 'inventory_outbox', batchSize: 100, maxAttempts: 5 },
    );
    expect(await inventoryRelay.runOnce()).toMatchObject({ claimed: 3, published: 3 });
    const statuses = await waitFor(async () => {
      const all = await Promise.all(placed.map((p) => orders.get(p.orderId)));
      return all.every((s) => s.reservation.status !== 'pending') ? all : undefined;
    });
    expect(statuses.map((s) => s.reservation.status)).toEqual(['reserved', 'reserved', 'rejected']);
  });
});
