import type { Env } from '../config/env.js';
import type { SqlDatabase } from '../db/types.js';
import type { Logger } from '../logger.js';
import { OutboxRelay } from '../outbox/OutboxRelay.js';
import type { Backend } from '../port/types.js';
import { OUTBOX_TABLES, type OutboxTable } from './constants.js';

/**
 * One relay per outbox table, each publishing to its table's stream on the backend: the backend
 * alone decides where a table's events go (RabbitMQ: an exchange; SQS: a queue).
 */
export function createRelays(
  deps: { db: SqlDatabase; backend: Pick<Backend, 'publisher'>; logger?: Logger | undefined },
  env: Pick<Env, 'RELAY_BATCH_SIZE' | 'RELAY_MAX_ATTEMPTS'>,
  tables: readonly OutboxTable[] = OUTBOX_TABLES,
): OutboxRelay[] {
  return tables.map(
    (table) =>
      new OutboxRelay(
        { db: deps.db, logger: deps.logger, publisher: deps.backend.publisher(table) },
        { table, batchSize: env.RELAY_BATCH_SIZE, maxAttempts: env.RELAY_MAX_ATTEMPTS },
      ),
  );
}
