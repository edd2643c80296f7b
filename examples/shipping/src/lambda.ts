import { Logger } from '@aws-lambda-powertools/logger';
import { LambdaClient } from '@aws-sdk/client-lambda';
import {
  DEFAULT_RETENTION,
  Journal,
  LambdaOutboxKick,
  loadBudget,
  outboxKick,
} from 'reliable-messaging-serverless';
import { sqsLambdaHandler, sqsModule } from 'reliable-messaging-serverless/sqs';
import { dataApiDatabase, env } from './deployed.js';
import { shippingHandler, TOPOLOGY } from './shipping.js';

/**
 * The shipping service's consumer as a Lambda function behind an SQS event source with partial
 * batch responses: what the `SqsConsumer` construct deploys around this entry. It reads the
 * variables the construct sets: the Data API login (`DATA_API_*`), the queues (`SOURCE_QUEUE_URL`,
 * `PARKING_QUEUE_URL`), the retry budget (`RETRY_*`), and the relay it kicks after each batch
 * (`RELAY_FUNCTION_NAME`, `RELAY_KICK_INTERVAL_MS`: `OutboxRelayFunction`'s `producers`), so
 * that its events leave without waiting for the relay's schedule.
 */
const logger = new Logger({ serviceName: 'shipping' });
const db = dataApiDatabase();
const budget = loadBudget();
const backend = sqsModule.create({
  region: env('AWS_REGION'),
  mode: 'visibility',
  budget,
  retention: DEFAULT_RETENTION,
  consumer: 'shipping-service',
  topology: TOPOLOGY,
  queueUrls: { source: env('SOURCE_QUEUE_URL'), parking: env('PARKING_QUEUE_URL') },
  logger,
});

const kick = new LambdaOutboxKick(
  { client: new LambdaClient({}), logger },
  {
    functionName: env('RELAY_FUNCTION_NAME'),
    from: 'shipping',
    minIntervalMs: Number(env('RELAY_KICK_INTERVAL_MS')),
  },
);

// one log line per step of each delivery (received, effect committed, acked, retried, parked)
const journal = new Journal(logger);

export const handler = sqsLambdaHandler({
  ...(await backend.lambdaDriver(shippingHandler(db, budget), { journal })),
  logger,
}).use(outboxKick({ kick }));
