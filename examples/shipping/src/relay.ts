import { Logger } from '@aws-lambda-powertools/logger';
import { SSMClient } from '@aws-sdk/client-ssm';
import {
  DEFAULT_RETENTION,
  loadBudget,
  OutboxRelay,
  relayLambdaHandler,
  SsmRelayStateStore,
} from 'reliable-messaging-serverless';
import { sqsModule } from 'reliable-messaging-serverless/sqs';
import { dataApiDatabase, env } from './deployed.js';
import { OUTBOX, TOPOLOGY } from './shipping.js';

/**
 * The shipping service's outbox relay as a Lambda function: what the `OutboxRelayFunction`
 * construct deploys around this entry (its 1-minute schedule, the consumer's kicks, its state
 * parameter). It publishes `shipping_outbox` to the service's SNS topic (`STREAM_TOPIC_ARNS`,
 * fan-out: every subscriber's queue gets each event) and marks a row only once the topic
 * accepted it.
 */
const number = (name: string) => Number(env(name));

const logger = new Logger({ serviceName: 'shipping-relay' });
const db = dataApiDatabase();
const backend = sqsModule.create({
  region: env('AWS_REGION'),
  mode: 'visibility',
  budget: loadBudget(),
  retention: DEFAULT_RETENTION,
  consumer: 'shipping-relay',
  topology: TOPOLOGY,
  // `stream=arn` pairs
  topicArns: Object.fromEntries(
    env('STREAM_TOPIC_ARNS')
      .split(',')
      .map((p) => p.split('=', 2)),
  ),
  logger,
});

export const handler = relayLambdaHandler(
  {
    relays: [
      new OutboxRelay(
        { db, publisher: backend.publisher(OUTBOX), logger },
        { table: OUTBOX, batchSize: 100, maxAttempts: 10 },
      ),
    ],
    logger,
  },
  {
    drainBudgetMs: number('RELAY_DRAIN_BUDGET_MS'),
    idleWaitMs: number('RELAY_IDLE_WAIT_MS'),
    kicked: {
      lingerMs: number('RELAY_LINGER_MS'),
      sweep: {
        quietMs: number('RELAY_SWEEP_QUIET_MS'),
        intervalMs: number('RELAY_SWEEP_INTERVAL_MS'),
      },
      state: new SsmRelayStateStore(new SSMClient({}), env('RELAY_STATE_PARAMETER')),
    },
  },
);
