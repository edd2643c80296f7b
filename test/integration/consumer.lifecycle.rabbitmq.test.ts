import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConsumer } from '../../devkit/consumers.js';
import { waitFor } from '../../devkit/waitFor.js';
import { RABBITMQ_NAMES, RETRY_NAMES, retryQueueName } from '../../shared/pipeline/names.js';
import { QUEUE_BOUNDS, rabbitRetryDelays } from '../../shared/transport/rabbitmq/index.js';
import { InventoryRig } from '../helpers/inventory.js';

describe('RabbitMQ consumer: topology, policies, lifecycle', () => {
  let b: InventoryRig;
  beforeAll(async () => {
    b = await InventoryRig.create('consumer_lifecycle');
  });
  afterAll(() => b?.close());

  it('one policy per queue with all its keys, applied through the management API', async () => {
    const policies = await b.vhost.management.request<
      { name: string; definition: Record<string, unknown>; 'apply-to': string }[]
    >('GET', `/api/policies/${encodeURIComponent(b.vhost.vhost)}`);
    const byName = new Map(policies?.map((p) => [p.name, p]));
    const expectedApplyTo = (await b.vhost.management.supportsQuorumApplyTo())
      ? 'quorum_queues'
      : 'queues';
    expect(byName.get(RABBITMQ_NAMES.inventoryQueue)).toMatchObject({
      'apply-to': expectedApplyTo,
      definition: {
        'dead-letter-exchange': RETRY_NAMES.parkingExchange,
        'dead-letter-routing-key': RETRY_NAMES.parkingRoutingKey,
        'dead-letter-strategy': 'at-least-once',
        overflow: 'reject-publish',
        'delivery-limit': 10,
      },
    });
    // no delivery limit: -1 from RabbitMQ 4.0 (whose default is 20), none on 3.x (which refuses -1)
    const major = Number((await b.vhost.management.version()).split('.')[0]);
    const unlimited = major >= 4 ? { 'delivery-limit': -1 } : {};
    for (const delay of rabbitRetryDelays(b.budget)) {
      expect(byName.get(retryQueueName(delay))?.definition).toEqual({
        'message-ttl': delay,
        'dead-letter-exchange': RETRY_NAMES.requeueExchange,
        'dead-letter-routing-key': RETRY_NAMES.requeueRoutingKey,
        'dead-letter-strategy': 'at-least-once',
        overflow: 'reject-publish',
        'max-length': QUEUE_BOUNDS.retry.maxLength,
        ...unlimited,
      });
    }
    const parking = byName.get(RETRY_NAMES.parkingQueue)?.definition;
    expect(parking).toHaveProperty('message-ttl');
    expect(parking?.['delivery-limit']).toEqual(unlimited['delivery-limit']);
    // + the bounds of audit.orders and orders.inventory-results, and the
    // results parking queue
    expect(policies).toHaveLength(5 + rabbitRetryDelays(b.budget).length);
  });

  it('the requeue exchange routes to inventory.orders only (never to audit.orders)', async () => {
    const bindings = await b.vhost.management.request<{ destination: string }[]>(
      'GET',
      `/api/exchanges/${encodeURIComponent(b.vhost.vhost)}/${RETRY_NAMES.requeueExchange}/bindings/source`,
    );
    expect(bindings?.map((x) => x.destination)).toEqual([RABBITMQ_NAMES.inventoryQueue]);
  });

  it('refuses prefetch 0 (unlimited)', async () => {
    await expect(
      startConsumer(b.backend, async () => [], { mode: 'worker', prefetch: 0 }),
    ).rejects.toThrow(/prefetch must be a whole number ≥ 1/);
  });

  it('graceful stop: stops consuming, finishes the batch in flight; nothing committed stays unacked', async () => {
    await b.stock('SKU-S', 10_000);
    const orders = Array.from({ length: 300 }, () => b.orderCreated('SKU-S', 1));
    await b.publish(...orders);
    const worker = await b.worker({ prefetch: 16 });
    await waitFor(() => b.lines.filter((l) => l.step === 'acked').length >= 40);
    await worker.stop();

    const committed = b.lines.filter((l) => l.step === 'effect-committed').map((l) => l.messageId);
    const acked = new Set(b.lines.filter((l) => l.step === 'acked').map((l) => l.messageId));
    expect(committed.every((id) => acked.has(id))).toBe(true);
    const { rows } = await b.t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM processed_messages',
    );
    const processed = rows[0]?.n ?? 0;
    expect(processed).toBe(committed.length);
    expect(processed).toBeLessThan(300); // it did stop
    // everything else is still in the queue, ready for the next consumer
    await waitFor(async () => (await b.depth(RABBITMQ_NAMES.inventoryQueue)) === 300 - processed);
  });
});
