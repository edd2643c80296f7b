import { randomUUID } from 'node:crypto';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import { startConsumer } from '../../devkit/consumers.js';
import { waitFor } from '../../devkit/waitFor.js';
import type { Backend, InboundMessage, OutboxRelay } from '../../shared/index.js';
import { newEnvelope } from '../../shared/index.js';
import { OrderResults } from '../../shared/orders/OrderResults.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import { createRelays } from '../../shared/pipeline/relays.js';
import { RabbitMqBackend } from '../../shared/transport/rabbitmq/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { type ConsumerRig, InventoryRig } from '../helpers/inventory.js';
import { SQS_SERVERS } from '../helpers/sqs.js';
import { SqsInventoryRig } from '../helpers/sqsInventory.js';

/**
 * The order side's reservation status comes from inventory's result events, consumed from the
 * results queue by `OrderResults` (never from a join into inventory's tables): the whole way on
 * real services, order → outbox → relay → inventory consumer → inventory_outbox → relay → results
 * queue → results consumer → the order's GET. A duplicate result is applied once, an older one
 * arriving late changes nothing, and an unreadable one is set aside, not lost.
 */
type Rig = ConsumerRig<Backend & (InventoryRig['backend'] | SqsInventoryRig['backend'])>;

const kinds = [
  {
    name: 'rabbitmq worker',
    rig: () => InventoryRig.create('order_results_worker'),
    mode: 'worker' as const,
  },
  {
    name: 'rabbitmq amazon mq trigger',
    rig: () => InventoryRig.create('order_results_amq'),
    mode: 'lambda' as const,
  },
  ...SQS_SERVERS.map((server) => ({
    name: `sqs trigger (${server.name})`,
    rig: () => SqsInventoryRig.create(server, `order_results_sqs_${server.name}`),
    mode: 'lambda' as const,
  })),
];

describe.each(kinds)('order status from inventory results ($name)', (kind) => {
  let b: Rig | undefined;
  afterEach(async () => {
    await b?.close();
    b = undefined;
  });

  it('shows pending until the result event arrives, then the status from the event; duplicates and late results change nothing', async () => {
    const rig = (await kind.rig()) as unknown as Rig;
    b = rig;
    const db = rig.t.db;
    const orders = new OrderService({ db });
    await rig.stock('SKU-A', 5);
    const place = (sku: string, quantity: number) =>
      orders.place({ sku, quantity, correlationId: `c-${randomUUID().slice(0, 8)}` });
    const reserved = await place('SKU-A', 2);
    const outOfStock = await place('SKU-A', 10);
    const unknownSku = await place('SKU-NOPE', 1);
    const all = [reserved, outOfStock, unknownSku].map((o) => o.orderId);
    const status = async (id: string) => (await orders.get(id)).reservation;

    const relays: OutboxRelay[] = createRelays(
      { db, backend: rig.backend },
      { RELAY_BATCH_SIZE: 100, RELAY_MAX_ATTEMPTS: 10 },
    );
    const relayRound = async () => {
      for (const r of relays) await r.runOnce();
    };

    // Inventory decides first; the order side has not heard yet: pending, whatever inventory's
    // tables say (the old code joined `reservations` and showed `reserved` here).
    const inventory = await startConsumer(rig.backend, rig.handler(), {
      mode: kind.mode,
      journal: rig.journal,
      batchSize: 10,
      batchWindowMs: 200,
      functionTimeoutMs: 1_000,
    });
    try {
      await waitFor(
        async () => {
          await relayRound();
          const rows = await Promise.all(all.map((id) => rig.reservation(id)));
          return rows.every((r) => r !== undefined);
        },
        { message: 'inventory decided every order', timeoutMs: 30_000 },
      );
      expect((await rig.reservation(reserved.orderId))?.status).toBe('reserved');
      for (const id of all) expect(await status(id)).toEqual({ status: 'pending', reason: null });

      // One event per decision in inventory_outbox.
      const { rows: events } = await db.query<{ event_type: string; n: number }>(
        `SELECT event_type, count(*)::int AS n FROM inventory_outbox
          GROUP BY event_type ORDER BY event_type`,
      );
      expect(events).toEqual([
        { event_type: 'inventory.reservation_rejected', n: 2 },
        { event_type: 'inventory.reserved', n: 1 },
      ]);

      // The order side's results consumer: the status now comes from the events.
      const results = new OrderResults({ db, journal: rig.journal });
      const resultsConsumer = await startConsumer(rig.backend, (m) => results.process(m), {
        mode: kind.mode,
        queue: 'results',
        journal: rig.journal,
        batchSize: 10,
        batchWindowMs: 200,
        functionTimeoutMs: 1_000,
      });
      try {
        await waitFor(
          async () => {
            await relayRound();
            const shown = await Promise.all(all.map(status));
            return shown.every((s) => s.status !== 'pending');
          },
          { message: 'the order side heard every result', timeoutMs: 30_000 },
        );
        expect(await status(reserved.orderId)).toEqual({ status: 'reserved', reason: null });
        expect(await status(outOfStock.orderId)).toEqual({
          status: 'rejected',
          reason: 'out_of_stock',
        });
        expect(await status(unknownSku.orderId)).toEqual({
          status: 'rejected',
          reason: 'unknown_sku',
        });

        // Cancel: inventory releases, announces it, and the order shows it.
        await orders.cancel(reserved.orderId, 'c-cancel');
        await waitFor(
          async () => {
            await relayRound();
            return (await status(reserved.orderId)).status === 'released';
          },
          { message: 'the release reached the order side', timeoutMs: 30_000 },
        );

        // The reserved event again (a redelivery): the inbox absorbs it. A reserved event with a
        // new id and the old version (a late one): the version check ignores it.
        const { rows } = await db.query<{ id: string }>(
          `SELECT id FROM inventory_outbox
            WHERE aggregate_id = $1 AND event_type = 'inventory.reserved'`,
          [reserved.orderId],
        );
        const reservedEventId = rows[0]?.id as string;
        const late = newEnvelope({
          type: 'inventory.reserved',
          aggregate: { type: 'reservation', id: reserved.orderId, version: 1 },
          data: { orderId: reserved.orderId, sku: 'SKU-A', quantity: 2 },
          correlationId: 'c-late',
          producer: 'inventory-service',
        });
        // The relay publishes the reserved event again (as after a lost confirm).
        await db.query('UPDATE inventory_outbox SET published_at = NULL WHERE id = $1', [
          reservedEventId,
        ]);
        await relayRound();
        const sent = await rig.backend.publisher('inventory_outbox').publish([late]);
        expect(sent.every((o) => o.ok)).toBe(true);
        await rig.waitForLine(reservedEventId, 'duplicate');
        await rig.waitForLine(late.id, 'acked');
        expect(rig.linesFor(late.id).find((l) => l.step === 'effect-committed')?.outcome).toBe(
          'stale',
        );
        expect(await status(reserved.orderId)).toEqual({ status: 'released', reason: null });
        const { rows: claims } = await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM processed_messages
            WHERE consumer_name = 'order-results' AND message_id = $1`,
          [reservedEventId],
        );
        expect(claims[0]?.n).toBe(1);

        // An unreadable result: set aside with its reason, acknowledged, nothing else changes.
        const poisonId = randomUUID();
        await sendRawResult(rig, poisonId, '{not-json');
        await rig.waitForLine(poisonId, 'acked');
        const { rows: aside } = await db.query<{ reason: string; body: string }>(
          'SELECT reason, body FROM order_results_set_aside WHERE message_id = $1',
          [poisonId],
        );
        expect(aside).toHaveLength(1);
        expect(aside[0]?.body).toBe('{not-json');
        expect(aside[0]?.reason).toMatch(/JSON|body/i);

        // The results queue is consumed, not growing.
        if (rig.backend instanceof RabbitMqBackend) {
          const depth = await rig.backend.withChannel(
            async (ch) => (await ch.checkQueue(RABBITMQ_NAMES.inventoryResultsQueue)).messageCount,
          );
          expect(depth).toBe(0);
        }
      } finally {
        await resultsConsumer.stop();
      }
    } finally {
      await inventory.stop();
    }
  });
});

/** Puts a message on the results queue as it is (bypassing the publisher). */
async function sendRawResult(rig: Rig, messageId: string, body: string): Promise<void> {
  const backend = rig.backend;
  if (backend instanceof RabbitMqBackend) {
    await backend.withChannel(async (ch) => {
      ch.publish(RABBITMQ_NAMES.inventoryExchange, 'inventory.reserved', Buffer.from(body), {
        persistent: true,
        messageId,
        type: 'inventory.reserved',
      });
      await ch.waitForConfirms();
    });
    return;
  }
  const sqs = backend as SqsInventoryRig['backend'];
  const { resultsUrl } = await sqs.queues();
  await sqs.client.send(
    new SendMessageCommand({
      QueueUrl: resultsUrl,
      MessageBody: body,
      MessageAttributes: {
        event_id: { DataType: 'String', StringValue: messageId },
        event_type: { DataType: 'String', StringValue: 'inventory.reserved' },
      },
    }),
  );
}

describe('OrderResults on PostgreSQL (batches in any order)', () => {
  let t: TestDatabase | undefined;
  afterEach(async () => {
    await t?.drop();
    t = undefined;
  });

  const result = (
    type: 'inventory.reserved' | 'inventory.released' | 'inventory.reservation_rejected',
    orderId: string,
    version: number,
  ) =>
    newEnvelope({
      type,
      aggregate: { type: 'reservation', id: orderId, version },
      data: {
        orderId,
        sku: 'SKU-B',
        quantity: 1,
        ...(type === 'inventory.reservation_rejected'
          ? { reason: 'out_of_stock', available: 0 }
          : {}),
      },
      correlationId: 'c-batch',
      producer: 'inventory-service',
    });
  const inbound = (e: ReturnType<typeof result>): InboundMessage => ({
    messageId: e.id,
    body: Buffer.from(JSON.stringify(e)),
    attempt: 0,
    redelivered: false,
    type: e.type,
  });

  it('the newest result wins within a batch and across batches; duplicates and unknown orders change nothing', async () => {
    t = await createTestDatabase('order_results_batch');
    const orders = new OrderService({ db: t.db });
    const results = new OrderResults({ db: t.db });
    const a = await orders.place({ sku: 'SKU-B', quantity: 1, correlationId: 'c' });
    const b = await orders.place({ sku: 'SKU-B', quantity: 1, correlationId: 'c' });
    const unknown = randomUUID();
    const released = result('inventory.released', a.orderId, 2);
    const reserved = result('inventory.reserved', a.orderId, 1);
    const rejected = result('inventory.reservation_rejected', b.orderId, 1);
    const stray = result('inventory.reserved', unknown, 1);

    // v2 before v1 in one batch, another order, an order the order side does not have, and a
    // message with no id: one outcome each, in order.
    const noId = { ...inbound(reserved), messageId: undefined };
    const first = await results.process([
      inbound(released),
      inbound(reserved),
      inbound(rejected),
      inbound(stray),
      noId,
    ]);
    expect(first.map((o) => (o.kind === 'ack' ? o.result : o.kind))).toEqual([
      'applied',
      'stale',
      'applied',
      'set-aside',
      'set-aside',
    ]);
    expect((await orders.get(a.orderId)).reservation).toEqual({ status: 'released', reason: null });
    expect((await orders.get(b.orderId)).reservation).toEqual({
      status: 'rejected',
      reason: 'out_of_stock',
    });

    // Everything again (redeliveries): nothing changes, nothing set aside twice.
    const again = await results.process([inbound(reserved), inbound(released), inbound(stray)]);
    expect(again.map((o) => (o.kind === 'ack' ? o.result : o.kind))).toEqual([
      'duplicate',
      'duplicate',
      'duplicate',
    ]);
    expect((await orders.get(a.orderId)).reservation.status).toBe('released');
    const { rows } = await t.db.query<{ message_id: string | null; reason: string }>(
      'SELECT message_id, reason FROM order_results_set_aside ORDER BY id',
    );
    expect(rows).toEqual([
      { message_id: null, reason: expect.stringMatching(/no message id/) },
      { message_id: stray.id, reason: `order ${unknown} is not known to the order service` },
    ]);
  });
});
