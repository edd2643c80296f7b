import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { DEFAULT_RETENTION, OutboxRelay } from '../../shared/index.js';
import { INVENTORY_CONSUMER } from '../../shared/inventory/ReserveInventory.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { REPUBLISH_PREFIX } from '../../shared/outbox/OutboxStore.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import type { RabbitMqBackend } from '../../shared/transport/rabbitmq/index.js';
import { InventoryRig } from '../helpers/inventory.js';

const SKU = 'sku-route-loss';

/**
 * A lost `inventory.orders` binding while orders flow (docs/design.md §4, "Missing routes"):
 * `audit.orders` (`order.#`) still takes every order event, so the broker confirms the publishes
 * made before the route check looks again, and the relay marks them. When a look finds the route
 * missing, the rows marked since the last good look go back into the outbox and reach inventory
 * once the binding is back: every order is reserved once, the copies of those that had arrived
 * are absorbed by the inbox. Real RabbitMQ (the binding removed and restored through the
 * management API) and PostgreSQL, a running relay and a running inventory worker.
 */
describe('outbox relay: what a lost binding swallowed is published again (RabbitMQ)', () => {
  let rig: InventoryRig;
  let relayBackend: RabbitMqBackend;

  beforeAll(async () => {
    rig = await InventoryRig.create('relay_route_loss');
    // the relay's own backend, as a relay process has: its own route check, looking every 2 s
    relayBackend = rig.scratch.backend(
      'rabbitmq',
      {
        budget: TEST_RETRY_BUDGET,
        retention: DEFAULT_RETENTION,
        consumer: 'relay-route-loss',
        topology: PIPELINE_TOPOLOGY,
      },
      {
        reconnect: { baseMs: 50, maxMs: 500 },
        publish: { confirmTimeoutMs: 5_000, connectTimeoutMs: 1_000 },
        routeCheck: { intervalMs: 2_000 },
      },
    );
    await relayBackend.prepare('publish');
  });
  afterAll(async () => {
    await relayBackend?.close();
    await rig?.close();
  });

  const management = () => rig.vhost.management;
  const bindingPath = () =>
    `/api/bindings/${encodeURIComponent(rig.vhost.vhost)}/e/${RABBITMQ_NAMES.ordersExchange}/q/${RABBITMQ_NAMES.inventoryQueue}`;
  const count = async (sql: string, params: unknown[] = []) =>
    Number((await rig.t.db.query<{ n: string }>(sql, params as string[])).rows[0]?.n ?? Number.NaN);

  it('the binding lost and restored mid-stream: every order reaches inventory exactly once', async () => {
    await rig.stock(SKU, 100_000);
    await rig.worker();
    const relay = new OutboxRelay(
      { db: rig.t.db, publisher: relayBackend.publisher('outbox') },
      { table: 'outbox', batchSize: 50, maxAttempts: 50, retryBaseMs: 100, retryMaxMs: 500 },
    );
    const stopRelay = new AbortController();
    const draining = relay.drain({ budgetMs: 180_000, idleWaitMs: 20, signal: stopRelay.signal });

    // orders flow, one at a time, until told to stop
    const orders = new OrderService({ db: rig.t.db });
    const placed: string[] = [];
    let flowing = true;
    const flow = (async () => {
      while (flowing) {
        const { eventId } = await orders.place({
          sku: SKU,
          quantity: 1,
          correlationId: `route-loss-${placed.length}`,
        });
        placed.push(eventId);
      }
    })();
    const reserved = () => count('SELECT count(*) AS n FROM reservations');
    let restored = false;
    try {
      await waitFor(async () => (await reserved()) >= 50, { message: 'orders flowing' });

      // the binding goes (the management API, as an operator or a broken definition import would)
      await management().request('DELETE', `${bindingPath()}/order.created`);
      // the relay's route check sees it and holds the new rows back
      await waitFor(
        () =>
          count(
            "SELECT count(*) AS n FROM outbox WHERE published_at IS NULL AND last_error LIKE 'route-missing:%'",
          ).then((n) => n >= 20),
        { message: 'rows held back as route-missing' },
      );
      await management().request('POST', bindingPath(), { routing_key: 'order.created' });
      restored = true;
      const before = placed.length;
      await waitFor(() => placed.length >= before + 50, { message: 'orders after the restore' });
    } finally {
      flowing = false;
      await flow;
      if (!restored) {
        await management()
          .request('POST', bindingPath(), { routing_key: 'order.created' })
          .catch(() => {});
      }
    }

    // every order is reserved (the lost ones too), once
    const n = placed.length;
    try {
      await waitFor(async () => (await reserved()) === n, {
        timeoutMs: 45_000,
        message: `${n} reservations`,
      }).catch(async (err: Error) => {
        throw new Error(`${err.message}: ${await reserved()} of ${n} orders reserved`);
      });
    } finally {
      stopRelay.abort();
    }
    const result = await draining;
    expect(result.roundErrors).toBe(0);
    expect(result.republished).toBeGreaterThan(0);
    expect(await count('SELECT count(*) AS n FROM outbox WHERE published_at IS NULL')).toBe(0);
    expect(
      await count(
        'SELECT count(DISTINCT message_id) AS n FROM processed_messages WHERE consumer_name = $1',
        [INVENTORY_CONSUMER],
      ),
    ).toBe(n);
    expect(
      await count(
        'SELECT count(*) AS n FROM processed_messages WHERE message_id = ANY (ARRAY(SELECT jsonb_array_elements_text($1::jsonb)::uuid))',
        [JSON.stringify(placed)],
      ),
    ).toBe(n);
    expect(await count("SELECT count(*) AS n FROM reservations WHERE status = 'reserved'")).toBe(n);
    // applied once each: the stock counts one unit per order
    expect(await rig.stockOf(SKU)).toMatchObject({ reserved: n });
    // the copies of rows that had arrived before the loss were delivered and absorbed
    expect(rig.lines.filter((l) => l.step === 'duplicate').length).toBeGreaterThan(0);
  }, 150_000);

  it('the results exchange: a lost orders.inventory-results binding puts back the inventory_outbox rows marked in the window, not the outbox rows', async () => {
    const db = rig.t.db;
    await db.query('TRUNCATE outbox, inventory_outbox');
    const backend = rig.scratch.backend(
      'rabbitmq',
      {
        budget: TEST_RETRY_BUDGET,
        retention: DEFAULT_RETENTION,
        consumer: 'relay-route-loss',
        topology: PIPELINE_TOPOLOGY,
      },
      { routeCheck: { intervalMs: 60_000 } },
    );
    const results = new OutboxRelay(
      { db, publisher: backend.publisher('inventory_outbox') },
      {
        table: 'inventory_outbox',
        batchSize: 50,
        maxAttempts: 50,
        retryBaseMs: 50,
        retryMaxMs: 200,
      },
    );
    const ordersRelay = new OutboxRelay(
      { db, publisher: backend.publisher('outbox') },
      { table: 'outbox', batchSize: 50, maxAttempts: 5 },
    );
    const binding = [
      RABBITMQ_NAMES.inventoryResultsQueue,
      RABBITMQ_NAMES.inventoryExchange,
      'inventory.#',
    ] as const;
    try {
      // a result and an order, both published while every route is there
      const created = rig.orderCreated(SKU, 1);
      expect(
        await rig.useCase().process([
          {
            messageId: created.id,
            body: Buffer.from(JSON.stringify(created)),
            attempt: 0,
            redelivered: false,
          },
        ]),
      ).toMatchObject([{ kind: 'ack' }]);
      await new OrderService({ db }).place({ sku: SKU, quantity: 1, correlationId: 'rl-2' });
      expect(await results.runOnce()).toMatchObject({ published: 1 });
      expect(await ordersRelay.runOnce()).toMatchObject({ published: 1 });
      // the results binding goes; the next look (the queue metrics' fresh one) sees it
      await backend.withChannel((ch) => ch.unbindQueue(...binding));
      expect((await backend.inspect()).routesMissing).toMatchObject({
        [RABBITMQ_NAMES.inventoryResultsQueue]: 1,
        [RABBITMQ_NAMES.inventoryQueue]: 0,
      });
      expect(await ordersRelay.republishLost()).toBe(0);
      expect(await results.republishLost()).toBe(1);
      // (the worker's result of the order, if it came, was never published: nothing to put back)
      const { rows } = await db.query<{ published: boolean; last_error: string | null }>(
        'SELECT published_at IS NOT NULL AS published, last_error FROM inventory_outbox',
      );
      expect(rows.filter((r) => r.published)).toEqual([]);
      expect(rows.filter((r) => r.last_error !== null)).toEqual([
        {
          published: false,
          last_error: `${REPUBLISH_PREFIX}no binding inventory → orders.inventory-results (inventory.#) on the broker`,
        },
      ]);
      expect(await count('SELECT count(*) AS n FROM outbox WHERE published_at IS NULL')).toBe(0);
      // held back while the route is missing, published once it is back
      expect(await results.runOnce()).toMatchObject({ published: 0 });
      await backend.withChannel((ch) => ch.bindQueue(...binding));
      await waitFor(
        async () => {
          await results.runOnce();
          return (
            (await count(
              "SELECT count(*) AS n FROM inventory_outbox WHERE published_at IS NULL OR last_error LIKE 'republished%'",
            )) === 0
          );
        },
        { message: 'the results published again' },
      );
    } finally {
      await backend.withChannel((ch) => ch.bindQueue(...binding)).catch(() => {});
      await backend.close();
    }
  });
});
