import { loadEnv } from '../../shared/config/env.js';
import { createLogger } from '../../shared/logger.js';
import { createRabbitRelays } from '../../shared/outbox/rabbitRelays.js';
import { declareTopology } from '../../shared/transport/rabbitmq/topology.js';
import { sharedDb, sharedRabbit } from '../commons/clients.js';
import { createOutboxRelayHandler } from './handler.js';

const env = loadEnv();
const logger = createLogger('outbox-relay');
const connection = sharedRabbit();

/** Lambda entry point (EventBridge schedule, rate 1 minute). */
export const handler = createOutboxRelayHandler(
  {
    relays: createRabbitRelays({ db: sharedDb(), connection, logger }, env),
    logger,
    prepare: () => connection.withChannel((ch) => declareTopology(ch)),
  },
  {
    drainBudgetMs: env.RELAY_DRAIN_BUDGET_MS,
    idleWaitMs: env.RELAY_IDLE_WAIT_MS,
    concurrency: env.RELAY_CONCURRENCY,
  },
);
