import { SSMClient } from '@aws-sdk/client-ssm';
import { loadEnv } from '../../shared/config/env.js';
import { createLogger } from '../../shared/logger.js';
import { transactionDeadline } from '../../shared/middleware/transactionDeadline.js';
import { relayLambdaHandler } from '../../shared/outbox/lambdaHandler.js';
import { publishOutboxMetrics } from '../../shared/outbox/metrics.js';
import {
  MemoryRelayStateStore,
  type RelayStateStore,
  SsmRelayStateStore,
} from '../../shared/outbox/relayState.js';
import type { OutboxTable } from '../../shared/pipeline/constants.js';
import { createRelays } from '../../shared/pipeline/relays.js';
import { sharedBackend, sharedDb } from '../commons/clients.js';

const env = loadEnv();
const logger = createLogger('outbox-relay');
const db = sharedDb({ service: 'outbox-relay', logger });

/** The deployed transport's backend (TRANSPORT=rabbitmq|sqs). */
const backend = sharedBackend(logger);
const relays = createRelays({ db, backend, logger }, env);
/** Where the relay keeps its state between invocations (the stack's SSM parameter). */
const state: RelayStateStore = env.RELAY_STATE_PARAMETER
  ? new SsmRelayStateStore(new SSMClient({ region: env.AWS_REGION }), env.RELAY_STATE_PARAMETER)
  : new MemoryRelayStateStore();

/**
 * Lambda entry point: asynchronous kicks from the producers after their COMMIT, and the
 * 1-minute EventBridge schedule's tick (heartbeat; a sweep of the outboxes when due).
 */
export const handler = relayLambdaHandler<OutboxTable>(
  {
    relays,
    logger,
    // What publishing needs (RabbitMQ: the exchanges and queues the relay relies on; a deployed
    // SQS pipeline's queues are its stack's, nothing to declare).
    prepare: async () => void (await backend.prepare('publish')),
    report: async (results, readOutboxes) => {
      // The heartbeat and the round errors of both outboxes go out even when the database is down;
      // the backlog gauges only when this invocation read the outboxes (a tick leaves the database
      // alone, so that Aurora can pause).
      const backlog = await publishOutboxMetrics(
        readOutboxes ? db : undefined,
        relays,
        results,
        logger,
      );
      // On Amazon MQ the queue depths come from the backend's inspection (RabbitMQ 4 brokers vend
      // no per-queue CloudWatch metrics), with QueueMetricsAvailable 1/0; it never fails the relay.
      await backend.reportMetrics?.();
      return backlog;
    },
  },
  {
    drainBudgetMs: env.RELAY_DRAIN_BUDGET_MS,
    idleWaitMs: env.RELAY_IDLE_WAIT_MS,
    concurrency: env.RELAY_CONCURRENCY,
    kicked: {
      lingerMs: env.RELAY_LINGER_MS,
      sweep: { quietMs: env.RELAY_SWEEP_QUIET_MS, intervalMs: env.RELAY_SWEEP_INTERVAL_MS },
      state,
    },
  },
).use(transactionDeadline({ db, logger }));
