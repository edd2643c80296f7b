import { RABBITMQ_NAMES } from '../../shared/config/constants.js';
import { loadEnv } from '../../shared/config/env.js';
import { createLogger } from '../../shared/logger.js';
import { publishOutboxMetrics } from '../../shared/outbox/metrics.js';
import { createRabbitRelays } from '../../shared/outbox/rabbitRelays.js';
import { createSqsRelays } from '../../shared/outbox/sqsRelays.js';
import { publishQueueMetrics } from '../../shared/transport/rabbitmq/queueMetrics.js';
import { declareTopology, RETRY_NAMES } from '../../shared/transport/rabbitmq/topology.js';
import {
  required,
  sharedDb,
  sharedManagement,
  sharedRabbit,
  sharedSqs,
} from '../commons/clients.js';
import { createOutboxRelayHandler } from './handler.js';

const env = loadEnv();
const logger = createLogger('outbox-relay');

/** The relays of the deployed transport (TRANSPORT=rabbitmq|sqs). */
function relays() {
  if (env.TRANSPORT === 'sqs') {
    const sourceUrl = required(env, 'SOURCE_QUEUE_URL');
    return {
      relays: createSqsRelays({ db: sharedDb(), client: sharedSqs(), logger }, env, {
        outbox: { queueUrl: sourceUrl, fifo: sourceUrl.endsWith('.fifo') },
        inventory_outbox: { queueUrl: required(env, 'RESULTS_QUEUE_URL') },
      }),
    };
  }
  const connection = sharedRabbit();
  return {
    relays: createRabbitRelays({ db: sharedDb(), connection, logger }, env),
    prepare: () => connection.withChannel((ch) => declareTopology(ch)),
  };
}

/** Lambda entry point (EventBridge schedule, rate 1 minute). */
const wiring = relays();
export const handler = createOutboxRelayHandler(
  {
    ...wiring,
    logger,
    report: async (results) => {
      await publishOutboxMetrics(sharedDb(), wiring.relays, results);
      // On Amazon MQ the queue depths come from the management API (RabbitMQ 4 brokers vend
      // no per-queue CloudWatch metrics); a failure here must not fail the relay.
      if (env.TRANSPORT === 'rabbitmq' && env.BROKER_SECRET_ARN) {
        await sharedManagement()
          .then((management) =>
            publishQueueMetrics(management, env.BROKER_VHOST, [
              RABBITMQ_NAMES.inventoryQueue,
              RETRY_NAMES.parkingQueue,
            ]),
          )
          .catch((err: unknown) =>
            logger.warn('queue metrics unavailable', { error: String(err) }),
          );
      }
    },
  },
  {
    drainBudgetMs: env.RELAY_DRAIN_BUDGET_MS,
    idleWaitMs: env.RELAY_IDLE_WAIT_MS,
    concurrency: env.RELAY_CONCURRENCY,
  },
);
