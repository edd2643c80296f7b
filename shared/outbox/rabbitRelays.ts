import { OUTBOX_EXCHANGE, OUTBOX_TABLES, type OutboxTable } from '../config/constants.js';
import type { Env } from '../config/env.js';
import type { SqlDatabase } from '../db/types.js';
import type { Logger } from '../logger.js';
import type { RabbitConnection } from '../transport/rabbitmq/RabbitConnection.js';
import { RabbitPublisher } from '../transport/rabbitmq/RabbitPublisher.js';
import type { OutboxRelay } from './OutboxRelay.js';
import { createRelays } from './relays.js';

/** One relay per outbox table, publishing to that table's exchange over a shared connection. */
export function createRabbitRelays(
  deps: { db: SqlDatabase; connection: RabbitConnection; logger?: Logger },
  env: Pick<
    Env,
    'RELAY_BATCH_SIZE' | 'RELAY_MAX_ATTEMPTS' | 'PUBLISH_WINDOW' | 'PUBLISH_TIMEOUT_MS'
  >,
  tables: readonly OutboxTable[] = OUTBOX_TABLES,
): OutboxRelay[] {
  return createRelays(
    deps,
    env,
    (table) =>
      new RabbitPublisher(
        { connection: deps.connection, logger: deps.logger },
        {
          exchange: OUTBOX_EXCHANGE[table],
          window: env.PUBLISH_WINDOW,
          confirmTimeoutMs: env.PUBLISH_TIMEOUT_MS,
        },
      ),
    tables,
  );
}
