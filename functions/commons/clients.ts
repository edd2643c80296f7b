import { RDSDataClient } from '@aws-sdk/client-rds-data';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { ConfigError, type Env, loadEnv } from '../../shared/config/env.js';
import { DataApiDatabase } from '../../shared/db/data-api/DataApiDatabase.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type { SqlDatabase } from '../../shared/db/types.js';
import { RabbitConnection } from '../../shared/transport/rabbitmq/RabbitConnection.js';
import { createSqsClient } from '../../shared/transport/sqs/client.js';

/**
 * Clients created once per Lambda container (cold start) and reused by every invocation.
 * Handlers' `create…Handler(deps)` factories take them explicitly, so tests and the local
 * runtime pass their own.
 */
let db: SqlDatabase | undefined;
let rabbit: RabbitConnection | undefined;
let sqs: SQSClient | undefined;

export function required(env: Env, name: keyof Env): string {
  const v = env[name];
  if (typeof v !== 'string' || v === '') throw new ConfigError(`${name} is not set`);
  return v;
}

/** node-postgres, or the RDS Data API when DB_DRIVER=data-api (no connection pool needed). */
export function sharedDb(): SqlDatabase {
  const env = loadEnv();
  if (!db && env.DB_DRIVER === 'data-api') {
    db = new DataApiDatabase(
      {
        client: new RDSDataClient({
          region: env.AWS_REGION,
          ...(env.DATA_API_ENDPOINT ? { endpoint: env.DATA_API_ENDPOINT } : {}),
        }),
      },
      {
        resourceArn: required(env, 'DATA_API_RESOURCE_ARN'),
        secretArn: required(env, 'DATA_API_SECRET_ARN'),
        database: required(env, 'DATA_API_DATABASE'),
      },
    );
  }
  db ??= new PgDatabase({ connectionString: env.DATABASE_URL, max: env.DB_POOL_MAX });
  return db;
}

export function sharedRabbit(): RabbitConnection {
  rabbit ??= new RabbitConnection({ url: loadEnv().AMQP_URL, connectionName: 'lambda' });
  return rabbit;
}

export function sharedSqs(): SQSClient {
  const env = loadEnv();
  sqs ??= createSqsClient({ endpoint: env.SQS_ENDPOINT, region: env.AWS_REGION });
  return sqs;
}
