import { loadEnv } from '../../shared/config/env.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type { SqlDatabase } from '../../shared/db/types.js';
import { RabbitConnection } from '../../shared/transport/rabbitmq/RabbitConnection.js';

/**
 * Clients created once per Lambda container (cold start) and reused by every invocation.
 * Handlers' `create…Handler(deps)` factories take them explicitly, so tests and the local
 * runtime pass their own.
 */
let db: SqlDatabase | undefined;
let rabbit: RabbitConnection | undefined;

export function sharedDb(): SqlDatabase {
  const env = loadEnv();
  db ??= new PgDatabase({ connectionString: env.DATABASE_URL, max: env.DB_POOL_MAX });
  return db;
}

export function sharedRabbit(): RabbitConnection {
  rabbit ??= new RabbitConnection({ url: loadEnv().AMQP_URL, connectionName: 'lambda' });
  return rabbit;
}
