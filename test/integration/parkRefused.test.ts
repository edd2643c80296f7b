import { DeleteQueueCommand } from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { CONSUMER_METRICS } from '../../shared/consumer/metrics.js';
import { publishParkRefused } from '../../shared/index.js';
import { RETRY_NAMES } from '../../shared/pipeline/names.js';
import { emfCapture } from '../helpers/emf.js';
import { InventoryRig } from '../helpers/inventory.js';
import { SQS_SERVERS } from '../helpers/sqs.js';
import { SqsInventoryRig } from '../helpers/sqsInventory.js';

/**
 * When dead-lettering itself fails (RabbitMQ: the parking route is gone, so the park copy is
 * returned; SQS: the parking queue is gone), the consumer publishes `ParkRefused` (CloudWatch EMF
 * through Powertools metrics, as the deployed reserve functions do), which the `ParkRefused`
 * alarm of both stacks watches.
 */

const refused = (docs: Record<string, unknown>[]) =>
  docs.filter((d) => d[CONSUMER_METRICS.parkRefused] === 1);

const POISON = (id: string) => ({ body: '{not-json', messageId: id, type: 'order.created' });

describe('a refused park publishes ParkRefused', () => {
  let close: (() => Promise<void>) | undefined;
  let emf: ReturnType<typeof emfCapture> | undefined;
  afterEach(async () => {
    emf?.restore();
    emf = undefined;
    await close?.();
    close = undefined;
  });

  it.each(['worker', 'lambda'] as const)(
    'RabbitMQ (%s): the parking route is missing',
    async (mode) => {
      const b = await InventoryRig.create('park_refused', TEST_RETRY_BUDGET, {
        onParkRefused: (r) => publishParkRefused('rabbitmq', r),
      });
      close = () => b.close();
      await b.backend.withChannel((ch) =>
        ch.unbindQueue(
          RETRY_NAMES.parkingQueue,
          RETRY_NAMES.parkingExchange,
          RETRY_NAMES.parkingRoutingKey,
        ),
      );
      emf = emfCapture();
      const docs = emf.docs;
      if (mode === 'worker') await b.worker();
      else await b.trigger();
      const id = 'b4d2e3f5-2222-4b3c-9d4e-0f9e8d7c6b5a';
      await b.publishRaw([POISON(id)]);
      await waitFor(() => refused(docs).length > 0, { message: 'ParkRefused published' });
      const [doc] = refused(docs);
      expect(doc).toMatchObject({
        service: 'inventory-consumer',
        Transport: 'rabbitmq',
        messageId: id,
        // the worker lets the broker dead-letter it; the Amazon MQ trigger gives the batch back
        fate: mode === 'worker' ? 'dead-lettered' : 'given-back',
      });
      expect(String(doc?.error)).toMatch(/NO_ROUTE/);
      const aws = doc?._aws as {
        CloudWatchMetrics: { Namespace: string; Dimensions: string[][] }[];
      };
      expect(aws.CloudWatchMetrics[0]?.Namespace).toBe('ReliableMessaging');
      expect(aws.CloudWatchMetrics[0]?.Dimensions[0]?.sort()).toEqual(['Transport', 'service']);
    },
    60_000,
  );

  it.each(
    SQS_SERVERS.flatMap((server) =>
      (['visibility', 'resend'] as const).map((mode) => ({ name: server.name, server, mode })),
    ),
  )(
    'SQS ($name, $mode): the parking queue is gone',
    async ({ server, mode }) => {
      const b = await SqsInventoryRig.create(server, `park_refused_${mode.slice(0, 3)}`, {
        mode,
        onParkRefused: (r) => publishParkRefused('sqs', r),
      });
      close = () => b.close();
      await b.client.send(new DeleteQueueCommand({ QueueUrl: b.queues.parkingUrl }));
      emf = emfCapture();
      const docs = emf.docs;
      await b.trigger();
      const id = 'c5e3f4a6-3333-4c4d-8e5f-1a0b9c8d7e6f';
      await b.sendRaw([POISON(id)]);
      await waitFor(() => refused(docs).length > 0, { message: 'ParkRefused published' });
      expect(refused(docs)[0]).toMatchObject({
        service: 'inventory-consumer',
        Transport: 'sqs',
        messageId: id,
        fate: 'returned', // reported failed: it comes back after its visibility timeout
      });
    },
    60_000,
  );
});
