import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { createReserveInventoryRabbitHandler } from '../functions/reserve-inventory-rabbitmq/handler.js';
import { createReserveInventorySqsHandler } from '../functions/reserve-inventory-sqs/handler.js';
import type { Journal } from '../shared/consumer/journal.js';
import { createLogger, type Logger } from '../shared/logger.js';
import type {
  Backend,
  MessageHandler,
  ParkNotices,
  RunningConsumer,
} from '../shared/port/types.js';
import {
  AMAZON_MQ_TRIGGER,
  RABBITMQ_NAMES,
  RabbitMqBackend,
} from '../shared/transport/rabbitmq/index.js';
import { createSqsClient, SqsBackend } from '../shared/transport/sqs/index.js';
import { AmazonMqTrigger } from './triggers/amazonMqTrigger.js';
import { SqsTrigger } from './triggers/sqsTrigger.js';

/**
 * How a consumer runs locally:
 * - `worker`: in this process, on the backend's own consumer (RabbitMQ worker, in-memory);
 * - `lambda`: the deployed reserve function's handler behind the emulation of its Lambda trigger
 *   (Amazon MQ event source mapping on RabbitMQ, SQS event source mapping on SQS).
 * SQS has only `lambda`.
 */
export type ConsumerMode = 'worker' | 'lambda';

export interface ConsumerSettings {
  mode?: ConsumerMode;
  /**
   * Which queue: `inventory` (default: `inventory.orders`, inventory's reserve function) or
   * `results` (`orders.inventory-results` / `orders-inventory-results`, the order side's results
   * function).
   */
  queue?: 'inventory' | 'results';
  journal?: Journal | undefined;
  logger?: Logger | undefined;
  /** Worker channels (RabbitMQ worker), or invocations at once (SQS trigger's maximum concurrency). */
  concurrency?: number;
  /** Worker: unacknowledged deliveries per channel, and the largest batch. */
  prefetch?: number;
  maxBatch?: number;
  /** Worker: channel reconnect backoff after a give-back. */
  reconnectBaseMs?: number;
  reconnectMaxMs?: number;
  /** Trigger: messages per invocation, batching window, the function's timeout. */
  batchSize?: number;
  batchWindowMs?: number;
  functionTimeoutMs?: number;
  /** SQS trigger: the mapping's `ReportBatchItemFailures` (default on). */
  reportBatchItemFailures?: boolean;
  /** Called when an emulated invocation fails (the batch goes back), before the trigger reacts. */
  onInvocationError?: (err: Error) => void;
  /** The use case's notices of parked messages (inventory: `INVENTORY_PARK_NOTICES`). */
  notices?: ParkNotices | undefined;
}

/** Starts a consumer of the backend's inventory queue (or results queue) around `handler`. */
export async function startConsumer(
  backend: Backend,
  handler: MessageHandler,
  settings: ConsumerSettings = {},
): Promise<RunningConsumer> {
  const mode = settings.mode ?? backend.capabilities.consumeModes[0] ?? 'worker';
  if (mode === 'worker') {
    return backend.consume(handler, {
      queue: settings.queue,
      journal: settings.journal,
      concurrency: settings.concurrency,
      prefetch: settings.prefetch,
      maxBatch: settings.maxBatch,
      reconnectBaseMs: settings.reconnectBaseMs,
      reconnectMaxMs: settings.reconnectMaxMs,
      notices: settings.notices,
    });
  }
  if (backend instanceof RabbitMqBackend) {
    return startAmazonMqTrigger(backend, handler, settings);
  }
  if (backend instanceof SqsBackend) {
    return startSqsTrigger(backend, handler, settings);
  }
  throw new Error(`no local consumer for the ${backend.transport} backend`);
}

const watched = <E, R>(
  handler: (event: E, context: Context) => Promise<R>,
  onError: ((err: Error) => void) | undefined,
) =>
  !onError
    ? handler
    : async (event: E, context: Context): Promise<R> => {
        try {
          return await handler(event, context);
        } catch (err) {
          onError(err as Error);
          throw err;
        }
      };

/**
 * The reserve function for RabbitMQ behind the Amazon MQ trigger emulation (one invocation at a
 * time, as AWS runs one per RabbitMQ event source mapping, whatever `concurrency` says).
 */
async function startAmazonMqTrigger(
  backend: RabbitMqBackend,
  handler: MessageHandler,
  settings: ConsumerSettings,
): Promise<RunningConsumer> {
  const results = settings.queue === 'results';
  const logger =
    settings.logger ??
    createLogger(results ? 'order-results-rabbitmq' : 'reserve-inventory-rabbitmq');
  // The order-results function composes the same handler (functions/order-results-rabbitmq).
  const fn = createReserveInventoryRabbitHandler({
    driver: backend.amazonMqDriver(handler, {
      journal: settings.journal,
      notices: settings.notices,
    }),
    logger,
  });
  const trigger = new AmazonMqTrigger(
    { broker: backend, handler: watched(fn, settings.onInvocationError), logger },
    {
      queue: results ? RABBITMQ_NAMES.inventoryResultsQueue : RABBITMQ_NAMES.inventoryQueue,
      vhost: backend.config.vhost,
      batchSize: settings.batchSize ?? AMAZON_MQ_TRIGGER.batchSize,
      batchWindowMs: settings.batchWindowMs ?? AMAZON_MQ_TRIGGER.batchWindowMs,
      ...(settings.functionTimeoutMs ? { functionTimeoutMs: settings.functionTimeoutMs } : {}),
      functionName: results ? 'order-results-rabbitmq' : 'reserve-inventory-rabbitmq',
    },
  );
  await trigger.start();
  return trigger;
}

/** The reserve function for SQS behind the SQS trigger emulation (long polls on a client of its own). */
async function startSqsTrigger(
  backend: SqsBackend,
  handler: MessageHandler,
  settings: ConsumerSettings,
): Promise<RunningConsumer> {
  const results = settings.queue === 'results';
  const logger =
    settings.logger ?? createLogger(results ? 'order-results-sqs' : 'reserve-inventory-sqs');
  const { driver, mode, fifo } = await backend.lambdaDriver(handler, {
    journal: settings.journal,
    queue: results ? 'results' : 'inventory',
    notices: settings.notices,
  });
  // The order-results function composes the same handler (functions/order-results-sqs).
  const fn = createReserveInventorySqsHandler({ driver, mode, fifo, logger });
  const queues = await backend.queues();
  const queueUrl = results ? queues.resultsUrl : queues.sourceUrl;
  const queueArn = results
    ? ((
        await backend.client.send(
          new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
        )
      ).Attributes?.QueueArn ?? '')
    : queues.sourceArn;
  // Long polls wait up to 20 s: a client whose request timeout is longer.
  const pollClient = createSqsClient({
    endpoint: backend.config.endpoint,
    region: backend.config.region,
    requestTimeoutMs: 25_000,
    maxAttempts: 1,
  });
  const trigger = new SqsTrigger(
    { client: pollClient, handler: watched(fn, settings.onInvocationError), logger },
    {
      queueUrl,
      queueArn,
      region: backend.config.region,
      ...(settings.batchSize ? { batchSize: settings.batchSize } : {}),
      ...(settings.batchWindowMs !== undefined ? { batchWindowMs: settings.batchWindowMs } : {}),
      ...(settings.concurrency ? { maxConcurrency: settings.concurrency } : {}),
      ...(settings.functionTimeoutMs ? { functionTimeoutMs: settings.functionTimeoutMs } : {}),
      ...(settings.reportBatchItemFailures !== undefined
        ? { reportBatchItemFailures: settings.reportBatchItemFailures }
        : {}),
      functionName: results ? 'order-results-sqs' : 'reserve-inventory-sqs',
    },
  );
  try {
    await trigger.start();
  } catch (err) {
    pollClient.destroy();
    throw err;
  }
  return {
    get stats() {
      return trigger.stats;
    },
    async stop() {
      await trigger.stop();
      pollClient.destroy();
    },
  };
}
