import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { ConfigError, type Env, loadEnv } from '../../shared/config/env.js';
import { DataApiDatabase } from '../../shared/db/data-api/DataApiDatabase.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type { SqlDatabase } from '../../shared/db/types.js';
import {
  type BrokerCredentials,
  readBrokerSecret,
  withCredentials,
} from '../../shared/transport/rabbitmq/brokerSecret.js';
import { RabbitConnection } from '../../shared/transport/rabbitmq/RabbitConnection.js';
import { RabbitManagement } from '../../shared/transport/rabbitmq/RabbitManagement.js';
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

let brokerSecret: Promise<BrokerCredentials> | undefined;

/** The Amazon MQ credentials, read once from Secrets Manager (again after a failed read). */
function brokerCredentials(env: Env): Promise<BrokerCredentials> {
  brokerSecret ??= readBrokerSecret(
    new SecretsManagerClient({ region: env.AWS_REGION }),
    required(env, 'BROKER_SECRET_ARN'),
  ).catch((err: unknown) => {
    brokerSecret = undefined;
    throw err;
  });
  return brokerSecret;
}

/**
 * The AMQP connection: to the Amazon MQ broker with credentials from Secrets Manager when
 * BROKER_SECRET_ARN is set (deployed), else to AMQP_URL. Nothing connects until first use.
 */
export function sharedRabbit(): RabbitConnection {
  const env = loadEnv();
  rabbit ??= new RabbitConnection({
    url: env.BROKER_SECRET_ARN
      ? async () =>
          withCredentials(
            required(env, 'BROKER_AMQP_ENDPOINT'),
            await brokerCredentials(env),
            env.BROKER_VHOST,
          )
      : env.AMQP_URL,
    connectionName: 'lambda',
  });
  return rabbit;
}

/** The broker's management API (Amazon MQ's console endpoint when deployed). */
export async function sharedManagement(): Promise<RabbitManagement> {
  const env = loadEnv();
  if (!env.BROKER_SECRET_ARN) return new RabbitManagement(env.RABBITMQ_MANAGEMENT_URL);
  return new RabbitManagement(
    withCredentials(required(env, 'BROKER_MANAGEMENT_ENDPOINT'), await brokerCredentials(env)),
  );
}

export function sharedSqs(): SQSClient {
  const env = loadEnv();
  sqs ??= createSqsClient({ endpoint: env.SQS_ENDPOINT, region: env.AWS_REGION });
  return sqs;
}
