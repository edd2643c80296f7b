import { loadEnv } from '../../shared/config/env.js';
import { createLogger } from '../../shared/logger.js';
import { publishOutboxMetrics } from '../../shared/outbox/metrics.js';
import { createRabbitRelays } from '../../shared/outbox/rabbitRelays.js';
import { createSqsRelays } from '../../shared/outbox/sqsRelays.js';
import { declareTopology } from '../../shared/transport/rabbitmq/topology.js';
import { required, sharedDb, sharedRabbit, sharedSqs } from '../commons/clients.js';
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
    report: (results) => publishOutboxMetrics(sharedDb(), wiring.relays, results),
  },
  {
    drainBudgetMs: env.RELAY_DRAIN_BUDGET_MS,
    idleWaitMs: env.RELAY_IDLE_WAIT_MS,
    concurrency: env.RELAY_CONCURRENCY,
  },
);
