import { afterEach, describe, expect, it } from 'vitest';
import { startConsumer } from '../../devkit/consumers.js';
import { startHttpApi } from '../../devkit/emulators/httpApi.js';
import { waitFor } from '../../devkit/waitFor.js';
import { createPlaceOrderHandler } from '../../functions/place-order/handler.js';
import type { Backend, RunningConsumer } from '../../shared/index.js';
import { createLogger, newEnvelope } from '../../shared/index.js';
import { OrderResults } from '../../shared/orders/OrderResults.js';
import { OrderService, type OrderView } from '../../shared/orders/OrderService.js';
import { createRelays } from '../../shared/pipeline/relays.js';
import { type ConsumerRig, InventoryRig } from '../helpers/inventory.js';
import { runCli } from '../helpers/redriveLimit.js';
import { SQS_SERVERS } from '../helpers/sqs.js';
import { SqsInventoryRig } from '../helpers/sqsInventory.js';

/**
 * An order whose event inventory parked shows it: `quarantined`, with the reason and the time,
 * through GET /orders/{id}, on every transport and consumer (RabbitMQ worker and Amazon MQ
 * trigger; SQS in both retry modes); after the cause is fixed and the event redriven, its result
 * replaces the quarantine. The parked message's diagnosis carries the true first failure time,
 * the correlation and trace ids, the original route, the producer, the attempts and the error
 * (`cli parked list --json`).
 */
type Rig = ConsumerRig<Backend & (InventoryRig['backend'] | SqsInventoryRig['backend'])>;

interface RigKind {
  name: string;
  rig: () => Promise<Rig>;
  mode: 'worker' | 'lambda';
  transport: 'rabbitmq' | 'sqs';
}

const kinds: RigKind[] = [
  {
    name: 'rabbitmq worker',
    rig: async () => (await InventoryRig.create('quarantine_worker')) as unknown as Rig,
    mode: 'worker',
    transport: 'rabbitmq',
  },
  {
    name: 'rabbitmq amazon mq trigger',
    rig: async () => (await InventoryRig.create('quarantine_amq')) as unknown as Rig,
    mode: 'lambda',
    transport: 'rabbitmq',
  },
  ...SQS_SERVERS.flatMap((server) =>
    (['visibility', 'resend'] as const).map(
      (mode): RigKind => ({
        name: `sqs ${mode} (${server.name})`,
        rig: async () =>
          (await SqsInventoryRig.create(server, `q_${mode.slice(0, 3)}_${server.name}`, {
            mode,
          })) as unknown as Rig,
        mode: 'lambda',
        transport: 'sqs',
      }),
    ),
  ),
];

const cliEnv = (b: Rig, transport: RigKind['transport']): Record<string, string> =>
  transport === 'rabbitmq'
    ? { AMQP_URL: (b as unknown as InventoryRig).vhost.amqpUrl }
    : {
        SQS_ENDPOINT: (b as unknown as SqsInventoryRig).endpoint,
        SQS_QUEUE_PREFIX: (b as unknown as SqsInventoryRig).prefix,
      };

/** The order side: GET /orders/{id} (the place-order handler behind the API emulation). */
async function ordersApi(b: Rig) {
  const handler = createPlaceOrderHandler({
    orders: new OrderService({ db: b.t.db }),
    logger: createLogger('place-order-test'),
  });
  const api = await startHttpApi(handler, { port: 0 });
  const get = async (orderId: string): Promise<OrderView> => {
    const res = await fetch(`${api.url}/orders/${orderId}`);
    expect(res.status).toBe(200);
    return (await res.json()) as OrderView;
  };
  return { api, get };
}

/** The order side's results consumer (OrderResults), on the rig's database. */
function resultsConsumer(b: Rig, mode: RigKind['mode']): Promise<RunningConsumer> {
  const results = new OrderResults({ db: b.t.db, journal: b.journal });
  return startConsumer(b.backend, (m) => results.process(m), {
    mode,
    queue: 'results',
    journal: b.journal,
    batchSize: 10,
    batchWindowMs: 200,
    functionTimeoutMs: 1_000,
  });
}

describe.each(kinds)('a parked order event quarantines its order ($name)', (kind) => {
  let b: Rig | undefined;
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c().catch(() => {});
    await b?.close();
    b = undefined;
  });

  it('poison and database-down-past-the-budget: quarantined with reason and time, with the whole diagnosis; after the fix and a redrive: reserved', async () => {
    const rig = await kind.rig();
    b = rig;
    const db = rig.t.db;
    await rig.stock('SKU-Q', 10);
    const orders = new OrderService({ db });
    const { api, get } = await ordersApi(rig);
    closers.push(() => api.close());

    // Two orders: one whose event will be poison, one inventory cannot decide (its database down).
    const poison = await orders.place({ sku: 'SKU-Q', quantity: 1, correlationId: 'c-poison' });
    const down = await orders.place({ sku: 'SKU-Q', quantity: 2, correlationId: 'c-down' });
    const { rows: outbox } = await db.query<{ id: string; trace_id: string }>(
      'SELECT id, trace_id FROM outbox WHERE id = $1',
      [down.eventId],
    );
    const traceId = outbox[0]?.trace_id as string;
    expect(traceId).toMatch(/^1-[0-9a-f]{8}-[0-9a-f]{24}$/); // made by the producer

    // The poison one: the relay does not send it; we send it as a broken producer would (its
    // quantity breaks the schema: a permanent error, parked at once).
    await db.query('UPDATE outbox SET published_at = now() WHERE id = $1', [poison.eventId]);
    const poisonEnvelope = newEnvelope({
      id: poison.eventId,
      type: 'order.created',
      aggregate: { type: 'order', id: poison.orderId, version: 1 },
      data: { orderId: poison.orderId, sku: 'SKU-Q', quantity: 1 },
      correlationId: 'c-poison',
      producer: 'order-service',
    });
    await rig.publishRaw([
      {
        body: JSON.stringify({ ...poisonEnvelope, data: { ...poisonEnvelope.data, quantity: 0 } }),
        messageId: poison.eventId,
        type: 'order.created',
        schemaVersion: '1.0',
      },
    ]);

    // Inventory's database is down for good; the order side's is up.
    const { db: inventoryDb, proxy } = await rig.proxiedDb();
    proxy.cut();
    const inventory = await (kind.mode === 'worker'
      ? (rig as unknown as InventoryRig).worker({ db: inventoryDb })
      : kind.transport === 'rabbitmq'
        ? (rig as unknown as InventoryRig).trigger({ db: inventoryDb })
        : (rig as unknown as SqsInventoryRig).trigger({ db: inventoryDb }));
    const results = await resultsConsumer(rig, kind.mode);
    closers.push(
      () => results.stop(),
      () => inventory.stop(),
    );
    const relays = createRelays(
      { db, backend: rig.backend },
      { RELAY_BATCH_SIZE: 100, RELAY_MAX_ATTEMPTS: 10 },
    );
    const relayRound = async () => {
      for (const r of relays) await r.runOnce();
    };
    const quarantined = async (orderId: string) => {
      const view = await get(orderId);
      return view.reservation.status === 'quarantined' ? view : undefined;
    };
    // The poison event alone first: in one batch with the other, the database being down would
    // give the whole batch back (the give-back rule), and the poison one would come again.
    const p = await waitFor(() => quarantined(poison.orderId), {
      message: 'the poison order shows quarantined',
      timeoutMs: 30_000,
    });
    expect(p.reservation.reason).toMatch(/^permanent \(permanent\): .*data\.quantity/);

    const publishedAt = Date.now();
    await relayRound(); // the healthy order's event
    const d = await waitFor(() => quarantined(down.orderId), {
      message: 'the order inventory could not decide shows quarantined',
      timeoutMs: 60_000,
    });
    expect(d.reservation.reason).toMatch(/^exhausted \(transient\): /);

    // The diagnosis, as `cli parked list --json` shows it.
    const listed = await runCli(
      ['parked', 'list', '--transport', kind.transport, '--json'],
      cliEnv(rig, kind.transport),
    );
    expect(listed.code, listed.stderr).toBe(0);
    const parked = JSON.parse(listed.stdout) as Record<string, unknown>[];
    const byId = (id: string) => parked.find((x) => x.messageId === id);
    const dp = byId(down.eventId);
    const queue =
      kind.transport === 'rabbitmq'
        ? { queue: 'inventory.orders', exchange: 'orders', routingKey: 'order.created' }
        : {
            queue: `${(rig as unknown as SqsInventoryRig).prefix}inventory-orders`,
            exchange: null,
            routingKey: null,
          };
    expect(dp).toMatchObject({
      via: 'consumer',
      type: 'order.created',
      reason: 'exhausted',
      errorClass: 'transient',
      attempts: rig.budget.maxAttempts,
      correlationId: 'c-down',
      traceId,
      producer: 'order-service',
      origin: queue,
      consumer: 'inventory@test',
    });
    expect(String(dp?.error)).not.toBe('');
    // the first failure is the first attempt's, not the park's: the ladder (1 + 2 + 3 s) lies between
    const firstFailure = Date.parse(String(dp?.firstFailureAt));
    const parkedAt = Date.parse(String(dp?.parkedAt));
    expect(firstFailure).toBeGreaterThanOrEqual(publishedAt - 1_000);
    expect(parkedAt - firstFailure).toBeGreaterThanOrEqual(5_000);
    // the order shows when it was parked
    expect(d.reservation.parkedAt).toBe(new Date(parkedAt).toISOString());
    const pp = byId(poison.eventId);
    expect(pp).toMatchObject({
      reason: 'permanent',
      correlationId: 'c-poison',
      traceId: poisonEnvelope.trace_id,
      producer: 'order-service',
      // Sent around our publisher, it has no origin headers: the worker sees its route on the
      // delivery, the Amazon MQ event names only the queue.
      origin:
        kind.transport === 'rabbitmq' && kind.mode === 'lambda'
          ? { ...queue, exchange: null, routingKey: null }
          : queue,
      attempts: 0,
    });
    expect(p.reservation.parkedAt).toBe(new Date(String(pp?.parkedAt)).toISOString());

    // The fix: the database is back; the operator redrives the order inventory could not decide.
    proxy.restore();
    const redriven = await rig.backend.parkingLot().redrive({ ids: [down.eventId] });
    expect(redriven.moved).toEqual([down.eventId]);
    await waitFor(
      async () => {
        await relayRound(); // its result goes out through inventory_outbox
        return (await get(down.orderId)).reservation.status === 'reserved';
      },
      { message: 'the redriven order shows reserved', timeoutMs: 30_000 },
    );
    expect((await get(down.orderId)).reservation).toEqual({ status: 'reserved', reason: null });
    // the poison one stays quarantined: nothing about it was decided
    expect((await get(poison.orderId)).reservation.status).toBe('quarantined');
    expect(await rig.stockOf('SKU-Q')).toMatchObject({ available: 10, reserved: 2 });
  }, 90_000);
});
