import { loadEnv } from '../../shared/config/env.js';
import { createLogger } from '../../shared/logger.js';
import { publishOutboxMetrics } from '../../shared/outbox/metrics.js';
import { createRelays } from '../../shared/outbox/relays.js';
import { publishQueueMetrics } from '../../shared/transport/rabbitmq/index.js';
import type { Backend } from '../../shared/transport/types.js';
import { sharedDb, sharedRabbit, sharedSqs } from '../commons/clients.js';
import { createOutboxRelayHandler } from './handler.js';

const env = loadEnv();
const logger = createLogger('outbox-relay');

/** The deployed transport's backend (TRANSPORT=rabbitmq|sqs). */
const backend: Backend = env.TRANSPORT === 'sqs' ? sharedSqs(logger) : sharedRabbit(logger);
const relays = createRelays({ db: sharedDb(), backend, logger }, env);

/** Lambda entry point (EventBridge schedule, rate 1 minute). */
export const handler = createOutboxRelayHandler(
  {
    relays,
    logger,
    // RabbitMQ: the exchanges and queues publishing needs (the topology the relay relies on).
    ...(env.TRANSPORT === 'rabbitmq'
      ? { prepare: async () => void (await backend.prepare('publish')) }
      : {}),
    report: async (results) => {
      await publishOutboxMetrics(sharedDb(), relays, results);
      // On Amazon MQ the queue depths come from the backend's inspection (RabbitMQ 4 brokers vend
      // no per-queue CloudWatch metrics); a failure here must not fail the relay.
      if (env.TRANSPORT === 'rabbitmq' && env.BROKER_SECRET_ARN) {
        await backend
          .inspect()
          .then((inspection) => publishQueueMetrics(inspection))
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
