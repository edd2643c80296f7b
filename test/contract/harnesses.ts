import { AmazonMqTrigger } from '../../devkit/triggers/amazonMqTrigger.js';
import { SqsTrigger } from '../../devkit/triggers/sqsTrigger.js';
import { createReserveInventoryRabbitHandler } from '../../functions/reserve-inventory-rabbitmq/handler.js';
import { createReserveInventorySqsHandler } from '../../functions/reserve-inventory-sqs/handler.js';
import { DEFAULT_RETENTION, TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { RABBITMQ_NAMES } from '../../shared/config/constants.js';
import { createLogger } from '../../shared/logger.js';
import { rabbitParkingLot } from '../../shared/transport/rabbitmq/parking.js';
import { RabbitConnection } from '../../shared/transport/rabbitmq/RabbitConnection.js';
import { RabbitPublisher } from '../../shared/transport/rabbitmq/RabbitPublisher.js';
import { RabbitSettler } from '../../shared/transport/rabbitmq/RabbitSettler.js';
import { RabbitWorker } from '../../shared/transport/rabbitmq/RabbitWorker.js';
import { prepareInventoryTopology } from '../../shared/transport/rabbitmq/topology.js';
import { createSqsClient } from '../../shared/transport/sqs/client.js';
import { sqsParkingLot } from '../../shared/transport/sqs/parking.js';
import { SqsPublisher } from '../../shared/transport/sqs/SqsPublisher.js';
import { type SqsRetryMode, SqsSettler } from '../../shared/transport/sqs/SqsSettler.js';
import type { SqsServer } from '../globalSetup.js';
import { createTestVhost } from '../helpers/rabbit.js';
import { createSqsFixture } from '../helpers/sqs.js';
import type { TransportHarness } from './transport.contract.js';

const logger = createLogger('contract');

/** RabbitMQ, worker mode or behind the Amazon MQ trigger emulation, in a vhost of its own. */
export async function rabbitHarness(
  label: string,
  consumer: 'worker' | 'lambda',
): Promise<TransportHarness> {
  const vhost = await createTestVhost(`contract_${label}`);
  const connection = new RabbitConnection({
    url: vhost.amqpUrl,
    initialReconnectDelayMs: 50,
    maxReconnectDelayMs: 500,
  });
  await prepareInventoryTopology({
    channel: (fn) => connection.withChannel(fn),
    management: vhost.management,
    vhost: vhost.vhost,
    budget: TEST_RETRY_BUDGET,
    retention: DEFAULT_RETENTION,
  });
  const settler = new RabbitSettler(
    { connection },
    { budget: TEST_RETRY_BUDGET, consumer: 'contract' },
  );
  const stops: (() => Promise<void>)[] = [];
  return {
    publisher: new RabbitPublisher({ connection }, { exchange: RABBITMQ_NAMES.ordersExchange }),
    missingDestination: new RabbitPublisher({ connection }, { exchange: 'no-such-exchange' }),
    parkingLot: rabbitParkingLot({ connection, settler }),
    async startConsumer(process) {
      if (consumer === 'worker') {
        const worker = new RabbitWorker(
          { connection, settler, process },
          { queue: RABBITMQ_NAMES.inventoryQueue, reconnectBaseMs: 50, reconnectMaxMs: 300 },
        );
        await worker.start();
        stops.push(() => worker.stop());
      } else {
        const trigger = new AmazonMqTrigger(
          {
            connection,
            handler: createReserveInventoryRabbitHandler({ process, settler, logger }),
          },
          {
            queue: RABBITMQ_NAMES.inventoryQueue,
            vhost: vhost.vhost,
            batchSize: 10,
            batchWindowMs: 50,
          },
        );
        await trigger.start();
        stops.push(() => trigger.stop());
      }
    },
    async close() {
      for (const stop of stops) await stop();
      await connection.close();
      await vhost.delete();
    },
  };
}

/** SQS behind the trigger emulation, with a retry mode, on standard or FIFO queues. */
export async function sqsHarness(
  server: SqsServer,
  label: string,
  mode: SqsRetryMode,
  fifo = false,
): Promise<TransportHarness> {
  const f = await createSqsFixture(server, `contract_${label}`, {
    fifo,
    visibilityTimeoutSeconds: 6,
  });
  const pollClient = createSqsClient({
    endpoint: f.endpoint,
    requestTimeoutMs: 25_000,
    maxAttempts: 1,
  });
  const settler = new SqsSettler(
    { client: f.client },
    {
      sourceUrl: f.queues.sourceUrl,
      parkingUrl: f.queues.parkingUrl,
      mode,
      budget: TEST_RETRY_BUDGET,
      consumer: 'contract',
      fifo,
    },
  );
  const stops: (() => Promise<void>)[] = [];
  return {
    publisher: new SqsPublisher({ client: f.client }, { queueUrl: f.queues.sourceUrl, fifo }),
    missingDestination: new SqsPublisher(
      { client: f.client },
      { queueUrl: `${f.queues.sourceUrl}-missing`, fifo },
    ),
    parkingLot: sqsParkingLot({
      client: f.client,
      sourceUrl: f.queues.sourceUrl,
      parkingUrl: f.queues.parkingUrl,
    }),
    async startConsumer(process) {
      const trigger = new SqsTrigger(
        {
          client: pollClient,
          handler: createReserveInventorySqsHandler({ process, settler, logger }),
        },
        {
          queueUrl: f.queues.sourceUrl,
          queueArn: f.queues.sourceArn,
          batchSize: 10,
          maxConcurrency: 1,
          functionTimeoutMs: 1_000,
        },
      );
      await trigger.start();
      stops.push(() => trigger.stop());
    },
    async close() {
      for (const stop of stops) await stop();
      pollClient.destroy();
      f.client.destroy();
    },
  };
}
