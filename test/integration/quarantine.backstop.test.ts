import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import { startConsumer } from '../../devkit/consumers.js';
import { waitFor } from '../../devkit/waitFor.js';
import type { Backend, RunningConsumer } from '../../shared/index.js';
import { quarantineNoticeId } from '../../shared/inventory/quarantine.js';
import { OrderResults } from '../../shared/orders/OrderResults.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import { createRelays } from '../../shared/pipeline/relays.js';
import { type ConsumerRig, InventoryRig } from '../helpers/inventory.js';
import { runCli } from '../helpers/redriveLimit.js';
import { SQS_SERVERS } from '../helpers/sqs.js';
import { SqsInventoryRig } from '../helpers/sqsInventory.js';

/**
 * The backstops park without our consumer (RabbitMQ's `delivery-limit` dead letter, SQS's
 * RedrivePolicy after `maxReceiveCount`), so no notice went out: `cli parked notify` reads the
 * parking lot without consuming it and publishes the same notices, idempotently (deterministic
 * ids), and the order shows `quarantined`.
 */
type Rig = ConsumerRig<Backend & (InventoryRig['backend'] | SqsInventoryRig['backend'])>;

async function placeAndRelay(b: Rig) {
  const orders = new OrderService({ db: b.t.db });
  const placed = await orders.place({ sku: 'SKU-B', quantity: 1, correlationId: 'c-backstop' });
  for (const r of createRelays(
    { db: b.t.db, backend: b.backend },
    { RELAY_BATCH_SIZE: 10, RELAY_MAX_ATTEMPTS: 10 },
  )) {
    if (r.store.table === 'outbox') await r.runOnce();
  }
  return { orders, placed };
}

async function notifiedAndQuarantined(
  b: Rig,
  env: Record<string, string>,
  transport: 'rabbitmq' | 'sqs',
  mode: 'worker' | 'lambda',
  expected: { orderId: string; eventId: string; reason: RegExp },
) {
  const orders = new OrderService({ db: b.t.db });
  const results = new OrderResults({ db: b.t.db, journal: b.journal });
  const consumer: RunningConsumer = await startConsumer(b.backend, (m) => results.process(m), {
    mode,
    queue: 'results',
    journal: b.journal,
    batchSize: 10,
    batchWindowMs: 200,
    functionTimeoutMs: 1_000,
  });
  try {
    expect((await orders.get(expected.orderId)).reservation.status).toBe('pending');
    const notify = async () => {
      const run = await runCli(['parked', 'notify', '--transport', transport], env);
      expect(run.code, run.stderr).toBe(0);
      return run.stdout;
    };
    const noticeId = quarantineNoticeId(expected.eventId, 0);
    expect(await notify()).toContain(`notified order ${expected.orderId} (v1): ${noticeId}`);
    const view = await waitFor(
      async () => {
        const v = await orders.get(expected.orderId);
        return v.reservation.status === 'quarantined' ? v : undefined;
      },
      { message: 'the order shows quarantined', timeoutMs: 30_000 },
    );
    expect(view.reservation.reason).toMatch(expected.reason);
    expect(view.reservation.parkedAt).toMatch(/^\d{4}-\d\d-\d\dT/);

    // Again: the same notice id, applied once; the message is still parked (read, not consumed).
    expect(await notify()).toContain(noticeId);
    await waitFor(() => b.lines.some((l) => l.messageId === noticeId && l.step === 'duplicate'), {
      message: 'the second notice is a duplicate',
      timeoutMs: 30_000,
    });
    expect(await b.inboxRows(noticeId)).toBe(1);
    expect(await b.parkedCount()).toBe(1);
    expect((await orders.get(expected.orderId)).reservation).toEqual(view.reservation);
  } finally {
    await consumer.stop();
  }
}

describe('parked notify: orders whose event the broker parked by itself', () => {
  it('NATS JetStream parks nothing by itself (brokerParking: false): nothing to notify', async () => {
    const run = await runCli(['parked', 'notify', '--transport', 'nats-jetstream'], {
      NATS_PREFIX: `notify_${Date.now()}_`,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('nats-jetstream never parks a message by itself');
    expect(run.stdout).not.toContain('order(s) to tell');
  });

  let b: Rig | undefined;
  afterEach(async () => {
    await b?.close();
    b = undefined;
  });

  it('RabbitMQ: dead-lettered for its delivery limit → quarantined after `parked notify`', async () => {
    const rig = (await InventoryRig.create('backstop_rabbit')) as unknown as InventoryRig;
    b = rig as unknown as Rig;
    await rig.backend.applyPolicies({ deliveryLimit: 1, only: [RABBITMQ_NAMES.inventoryQueue] });
    const { placed } = await placeAndRelay(b);
    // A consumer that dies with every delivery: read and handed back until the broker parks it.
    await waitFor(
      async () => {
        await rig.backend.withChannel(async (ch) => {
          const msg = await ch.get(RABBITMQ_NAMES.inventoryQueue, { noAck: false });
          if (msg) ch.nack(msg, false, true);
        });
        return (await rig.parkedCount()) === 1;
      },
      { message: 'the broker dead-letters it', timeoutMs: 30_000 },
    );
    const [parked] = await rig.parked();
    expect(parked).toMatchObject({ via: 'broker', diagnosis: { messageId: placed.eventId } });
    expect(parked?.diagnosis.origin).toEqual({
      queue: 'inventory.orders',
      exchange: 'orders',
      routingKey: 'order.created',
    });
    await notifiedAndQuarantined(b, { AMQP_URL: rig.vhost.amqpUrl }, 'rabbitmq', 'worker', {
      orderId: placed.orderId,
      eventId: placed.eventId,
      reason: /^exhausted \(broker:delivery_limit\): dead-lettered by the broker/,
    });
  }, 90_000);

  it.each(SQS_SERVERS)(
    'SQS ($name): moved by the RedrivePolicy after maxReceiveCount → quarantined after `parked notify`',
    async (server) => {
      const rig = await SqsInventoryRig.create(server, `backstop_${server.name}`);
      b = rig as unknown as Rig;
      const { placed } = await placeAndRelay(b);
      // A consumer that never settles it: received again and again until SQS moves it.
      await waitFor(
        async () => {
          await rig.client.send(
            new ReceiveMessageCommand({
              QueueUrl: rig.queues.sourceUrl,
              VisibilityTimeout: 0,
              WaitTimeSeconds: 0,
            }),
          );
          return (await rig.parkedCount()) === 1;
        },
        { message: 'SQS moves it to parking', timeoutMs: 30_000, intervalMs: 50 },
      );
      const [parked] = await rig.parked();
      expect(parked).toMatchObject({ via: 'broker', diagnosis: { messageId: placed.eventId } });
      expect(parked?.diagnosis.origin.queue).toBe(`${rig.prefix}inventory-orders`);
      await notifiedAndQuarantined(
        b,
        { SQS_ENDPOINT: rig.endpoint, SQS_QUEUE_PREFIX: rig.prefix },
        'sqs',
        'lambda',
        {
          orderId: placed.orderId,
          eventId: placed.eventId,
          reason: /^exhausted \(sqs:maxReceiveCount\): moved by the queue redrive policy/,
        },
      );
    },
    90_000,
  );
});
