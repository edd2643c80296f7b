import { OUTBOX_TABLES, type OutboxTable } from '../config/constants.js';
import type { Env } from '../config/env.js';
import type { SqlDatabase } from '../db/types.js';
import type { Logger } from '../logger.js';
import type { Publisher } from '../transport/types.js';
import { OutboxRelay } from './OutboxRelay.js';

/** One relay per outbox table; the transport only decides where each table's events go. */
export function createRelays(
  deps: { db: SqlDatabase; logger?: Logger | undefined },
  env: Pick<Env, 'RELAY_BATCH_SIZE' | 'RELAY_MAX_ATTEMPTS'>,
  publisherFor: (table: OutboxTable) => Publisher,
  tables: readonly OutboxTable[] = OUTBOX_TABLES,
): OutboxRelay[] {
  return tables.map(
    (table) =>
      new OutboxRelay(
        { db: deps.db, logger: deps.logger, publisher: publisherFor(table) },
        { table, batchSize: env.RELAY_BATCH_SIZE, maxAttempts: env.RELAY_MAX_ATTEMPTS },
      ),
  );
}
