import type { SQSClient } from '@aws-sdk/client-sqs';
import { OUTBOX_TABLES, type OutboxTable } from '../config/constants.js';
import type { Env } from '../config/env.js';
import type { SqlDatabase } from '../db/types.js';
import type { Logger } from '../logger.js';
import { SqsPublisher } from '../transport/sqs/SqsPublisher.js';
import type { OutboxRelay } from './OutboxRelay.js';
import { createRelays } from './relays.js';

/** Queue URLs the relay publishes to: order events to inventory's queue, results to the order service's. */
export interface SqsRelayTargets {
  outbox: { queueUrl: string; fifo?: boolean };
  inventory_outbox: { queueUrl: string; fifo?: boolean };
}

/** One relay per outbox table, publishing to that table's SQS queue. */
export function createSqsRelays(
  deps: { db: SqlDatabase; client: SQSClient; logger?: Logger },
  env: Pick<Env, 'RELAY_BATCH_SIZE' | 'RELAY_MAX_ATTEMPTS'>,
  targets: SqsRelayTargets,
  tables: readonly OutboxTable[] = OUTBOX_TABLES,
): OutboxRelay[] {
  return createRelays(
    deps,
    env,
    (table) => new SqsPublisher({ client: deps.client }, targets[table]),
    tables,
  );
}
