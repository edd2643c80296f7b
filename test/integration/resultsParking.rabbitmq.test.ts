import type { GetMessage } from 'amqplib';
import { afterEach, describe, expect, it } from 'vitest';
import { startConsumer } from '../../devkit/consumers.js';
import { createScratch, proxiedDatabase, type ScratchEnvironment } from '../../devkit/scratch.js';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { DEFAULT_RETENTION, newEnvelope } from '../../shared/index.js';
import { OrderResults } from '../../shared/orders/OrderResults.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import type { RabbitMqBackend } from '../../shared/transport/rabbitmq/index.js';
import { publishQueueMetrics } from '../../shared/transport/rabbitmq/queueMetrics.js';
import { SERVICES } from '../helpers/services.js';

/**
 * A result the order side cannot apply for a long time (its database unreachable: the consumer
 * throws, the batch goes back to the broker) is not dropped and does not loop for ever: after the
 * results queue's delivery limit the broker dead-letters it into `orders.inventory-results.parking`.
 * RabbitMQ 4 sets a default limit of 20 on every quorum queue and drops over it when the queue has
 * no dead-letter exchange; 3.10 (here) has no default, so the backend sets a low one.
 */
const modes = ['worker', 'lambda'] as const;

describe.each(modes)(
  'results over their delivery limit reach the results parking queue (%s)',
  (mode) => {
    let scratch: ScratchEnvironment | undefined;
    const closers: (() => Promise<unknown>)[] = [];
    afterEach(async () => {
      for (const c of closers.reverse()) await c().catch(() => {});
      closers.length = 0;
      await scratch?.close();
      scratch = undefined;
    });

    it('parks the result with the broker’s delivery-limit death, and the relay publishes its depth', async () => {
      scratch = await createScratch(SERVICES, `results_parking_${mode}`);
      const backend = scratch.backend(
        'rabbitmq',
        {
          budget: TEST_RETRY_BUDGET,
          retention: DEFAULT_RETENTION,
          consumer: 'order-results@test',
          topology: PIPELINE_TOPOLOGY,
        },
        { reconnect: { baseMs: 50, maxMs: 200 }, resultsDeliveryLimit: 3 },
      ) as RabbitMqBackend;
      await backend.prepare();

      // The order side's database is unreachable: every batch throws and goes back.
      const { db, proxy, close } = await proxiedDatabase(scratch.database.url);
      closers.push(close);
      proxy.cut();
      const results = new OrderResults({ db });
      const consumer = await startConsumer(backend, (m) => results.process(m), {
        mode,
        queue: 'results',
        reconnectBaseMs: 50,
        reconnectMaxMs: 200,
        batchSize: 10,
        batchWindowMs: 50,
        functionTimeoutMs: 5_000,
      });
      closers.push(() => consumer.stop());

      const orderId = '00000000-0000-4000-8000-000000000012';
      const result = newEnvelope({
        type: 'inventory.reserved',
        aggregate: { type: 'reservation', id: orderId, version: 1 },
        data: { orderId, sku: 'SKU-R', quantity: 1 },
        correlationId: 'c-results-parking',
        producer: 'inventory-service',
      });
      const sent = await backend.publisher('inventory_outbox').publish([result]);
      expect(sent.every((o) => o.ok)).toBe(true);

      const depth = (queue: string) =>
        backend
          .withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount)
          .catch((err: Error) => {
            if (/NOT_FOUND|404/.test(err.message)) return -1; // the queue is not declared
            throw err;
          });
      await waitFor(async () => (await depth(RABBITMQ_NAMES.resultsParkingQueue)) === 1, {
        message: 'the result reached orders.inventory-results.parking',
        timeoutMs: 30_000,
      });
      await consumer.stop();
      expect(await depth(RABBITMQ_NAMES.inventoryResultsQueue)).toBe(0);

      // The relay's queue metrics carry the results parking depth (its alarm's metric).
      const published = publishQueueMetrics(await backend.inspect());
      expect(published[RABBITMQ_NAMES.resultsParkingQueue]).toMatchObject({ depth: 1, ready: 1 });

      // The parked message is the result, dead-lettered by the broker for its delivery limit.
      const parked = await backend.withChannel(async (ch) => {
        const msg = (await ch.get(RABBITMQ_NAMES.resultsParkingQueue, { noAck: false })) as
          | GetMessage
          | false;
        if (!msg) throw new Error('the results parking queue is empty');
        ch.nack(msg, false, true);
        return msg;
      });
      expect(parked.properties.messageId).toBe(result.id);
      const deaths = parked.properties.headers?.['x-death'] as
        | { queue: string; reason: string }[]
        | undefined;
      expect(deaths?.[0]).toMatchObject({
        queue: RABBITMQ_NAMES.inventoryResultsQueue,
        reason: 'delivery_limit',
      });
      expect(JSON.parse(parked.content.toString('utf8')).id).toBe(result.id);
    });
  },
);
