import { SSMClient } from '@aws-sdk/client-ssm';
import {
  createLogger,
  loadEnv,
  MemoryRelayStateStore,
  publishOutboxMetrics,
  type RelayStateStore,
  relayLambdaHandler,
  SsmRelayStateStore,
} from '../../shared/index.js';
import { transactionDeadline } from '../../shared/middleware/transactionDeadline.js';
import type { OutboxTable } from '../../shared/pipeline/constants.js';
import { createRelays, serviceOfOutbox } from '../../shared/pipeline/relays.js';
import { SERVICES } from '../../shared/pipeline/schema.js';
import { serviceDb, sharedBackend } from '../commons/clients.js';

const env = loadEnv();
const logger = createLogger('outbox-relay');
// each outbox in its service's database
const dbs = {
  orders: serviceDb('orders', { service: 'outbox-relay', logger }),
  inventory: serviceDb('inventory', { service: 'outbox-relay', logger }),
};

/** The deployed transport's backend (TRANSPORT=rabbitmq|sqs). */
const backend = sharedBackend(logger);
const relays = createRelays({ db: dbs, backend, logger }, env);
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
      // (each service's outboxes read in its own database; the backlog is their sum)
      let backlog: number | undefined = 0;
      for (const service of SERVICES) {
        const mine = relays.flatMap((r, i) =>
          serviceOfOutbox(r.store.table as OutboxTable) === service ? [i] : [],
        );
        const part = await publishOutboxMetrics(
          readOutboxes ? dbs[service] : undefined,
          mine.map((i) => relays[i] as (typeof relays)[number]),
          mine.map((i) => results[i] ?? {}),
          logger,
        );
        backlog = backlog === undefined || part === undefined ? undefined : backlog + part;
      }
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
)
  .use(transactionDeadline({ db: dbs.orders, logger }))
  .use(transactionDeadline({ db: dbs.inventory, logger }));
