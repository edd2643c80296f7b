import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { RABBITMQ_NAMES, RETRY_NAMES } from '../../shared/pipeline/names.js';
import { publishQueueMetrics } from '../../shared/transport/rabbitmq/queueMetrics.js';
import { InventoryRig } from '../helpers/inventory.js';

describe('reserve inventory on RabbitMQ: parking lot unavailable', () => {
  let b: InventoryRig;
  afterEach(() => b?.close());

  it('the parking route is missing: nothing is lost; the broker holds the message and parks it once the route is back', async () => {
    b = await InventoryRig.create('reserve_parking_down');
    const parkingBinding = [
      RETRY_NAMES.parkingQueue,
      RETRY_NAMES.parkingExchange,
      RETRY_NAMES.parkingRoutingKey,
    ] as const;
    await b.backend.withChannel((ch) => ch.unbindQueue(...parkingBinding));
    await b.worker();
    const id = 'a3c1e2d4-1111-4a2b-8c3d-9e8f7a6b5c4d';
    await b.publishRaw([{ body: '{not-json', messageId: id, type: 'order.created' }]);

    // The consumer's confirmed copy to parking is returned (no route), so it nacks the original
    // without requeue and lets the broker dead-letter it.
    await b.waitForLine(id, 'parked');
    const line = b.linesFor(id).find((l) => l.step === 'parked');
    expect(line?.outcome).toBe('dead-lettered by the broker');
    expect(line?.reason).toMatch(/returned: 312 NO_ROUTE/);

    // At-least-once dead lettering: the broker keeps it in inventory.orders, not deliverable,
    // until the dead-letter target confirms it. Not in parking, not lost, not redelivered.
    const queue = () =>
      b.vhost.management.request<{ messages_dlx?: number }>(
        'GET',
        `/api/queues/${encodeURIComponent(b.vhost.vhost)}/${RABBITMQ_NAMES.inventoryQueue}`,
      );
    await waitFor(async () => (await queue())?.messages_dlx === 1, {
      message: 'message held for dead lettering',
    });
    expect(await b.depth(RABBITMQ_NAMES.inventoryQueue)).toBe(0); // nothing ready for consumers
    // the relay's minute report carries it: the HeldForDeadLettering alarm's metric
    await waitFor(
      async () =>
        publishQueueMetrics(await b.backend.inspect())[RABBITMQ_NAMES.inventoryQueue]?.held === 1,
      { message: 'HeldForDeadLettering reports it' },
    );
    expect(await b.parkedCount()).toBe(0);
    expect(b.linesFor(id).filter((l) => l.step === 'received')).toHaveLength(1);

    // The route comes back. On its own, RabbitMQ 3.10 retries the dead letter only after
    // dead_letter_worker_publisher_confirm_timeout (180 s by default; measured here: 180.0 s).
    // Re-applying the queue's policy with a change restarts the dead-letter worker at once.
    await b.backend.withChannel((ch) => ch.bindQueue(...parkingBinding));
    await b.backend.applyPolicies({ deliveryLimit: 11, only: [RABBITMQ_NAMES.inventoryQueue] });
    await waitFor(async () => (await b.parkedCount()) === 1, {
      message: 'the message reaches parking',
    });

    const [parked] = await b.parked();
    expect(parked?.via).toBe('broker');
    expect(parked?.diagnosis).toMatchObject({ messageId: id, errorClass: 'broker:rejected' });
  });
});
