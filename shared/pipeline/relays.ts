import { type Backend, type Env, type Logger, OutboxRelay, type SqlDatabase } from '../index.js';
import { OUTBOX_TABLES, type OutboxTable } from './constants.js';
import { OUTBOX_OF, SERVICES, type Service } from './schema.js';

/** The service whose database holds an outbox table. */
export function serviceOfOutbox(table: OutboxTable): Service {
  return SERVICES.find((s) => OUTBOX_OF[s] === table) as Service;
}

/**
 * One database per service, or one for both (tests that put both services' schemas in one
 * scratch database).
 */
export type ServiceDatabases = SqlDatabase | Readonly<Record<Service, SqlDatabase>>;

/** The database of `service` among `dbs`. */
export function databaseOf(dbs: ServiceDatabases, service: Service): SqlDatabase {
  return 'transaction' in dbs ? dbs : dbs[service];
}

/**
 * One relay per outbox table, each reading its service's database and publishing to its table's
 * stream on the backend: the backend alone decides where a table's events go (RabbitMQ: an
 * exchange; SQS: a queue or a topic).
 */
export function createRelays(
  deps: { db: ServiceDatabases; backend: Pick<Backend, 'publisher'>; logger?: Logger | undefined },
  env: Pick<Env, 'RELAY_BATCH_SIZE' | 'RELAY_MAX_ATTEMPTS'>,
  tables: readonly OutboxTable[] = OUTBOX_TABLES,
): OutboxRelay[] {
  return tables.map(
    (table) =>
      new OutboxRelay(
        {
          db: databaseOf(deps.db, serviceOfOutbox(table)),
          logger: deps.logger,
          publisher: deps.backend.publisher(table),
        },
        { table, batchSize: env.RELAY_BATCH_SIZE, maxAttempts: env.RELAY_MAX_ATTEMPTS },
      ),
  );
}
