import { LambdaClient } from '@aws-sdk/client-lambda';
import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { DataApiDatabase, DEFAULT_RESUME_WAIT } from '../../shared/db/data-api/DataApiDatabase.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import {
  type Backend,
  ConfigError,
  databaseResumeReporter,
  type Env,
  LambdaOutboxKick,
  type Logger,
  loadBudget,
  loadEnv,
  noKick,
  type OutboxKick,
  publishParkRefused,
  type SqlDatabase,
  transactionTimeoutsOf,
} from '../../shared/index.js';
import { loadRetention } from '../../shared/maintenance/retention.js';
import { type Service, serviceDatabaseUrls } from '../../shared/pipeline/schema.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { CODE_VERSION } from '../../shared/pipeline/version.js';
import {
  type BrokerCredentials,
  type RabbitMqBackend,
  rabbitmqConfigFromEnv,
  rabbitmqModule,
  readBrokerSecret,
} from '../../shared/transport/rabbitmq/index.js';
import { type SqsBackend, sqsModule } from '../../shared/transport/sqs/index.js';

/**
 * Clients created once per Lambda container (cold start) and reused by every invocation.
 * Handlers' `create…Handler(deps)` factories take them explicitly, so tests and the local
 * runtime pass their own.
 */
const dbs: Partial<Record<Service, SqlDatabase>> = {};
let rabbit: RabbitMqBackend | undefined;
let sqs: SqsBackend | undefined;

export function required(env: Env, name: keyof Env): string {
  const v = env[name];
  if (typeof v !== 'string' || v === '') throw new ConfigError(`${name} is not set`);
  return v;
}

/** How a function's database lives with Aurora's pause (the first `sharedDb` call decides). */
export interface SharedDbOptions {
  /** The function's name: the `service` dimension of `DatabaseResumes` and the log lines. */
  service: string;
  logger?: Logger;
  /**
   * Wait for a resuming cluster within the invocation's budget (`DEFAULT_RESUME_WAIT`: at most
   * 60 s, ending 5 s before the deadline `transactionDeadline` sets). Default true; place-order
   * says false: it answers 503 with Retry-After at once (docs/design.md §12).
   */
  waitForResume?: boolean;
}

/**
 * A service's database (each service owns one: docs/design.md): node-postgres (`DATABASE_URL` for
 * orders, `INVENTORY_DATABASE_URL` for inventory), or the RDS Data API when DB_DRIVER=data-api
 * (`DATA_API_DATABASE`, `INVENTORY_DATA_API_DATABASE`: two databases of one cluster; no pool
 * needed); every transaction bounded by DB_LOCK_TIMEOUT_MS, DB_STATEMENT_TIMEOUT_MS and
 * DB_IDLE_IN_TRANSACTION_TIMEOUT_MS (entry points add `transactionDeadline` for the invocation).
 * Through the Data API a call refused by a resuming cluster waits for it (`options`).
 */
export function serviceDb(service: Service, options?: SharedDbOptions): SqlDatabase {
  const env = loadEnv();
  const existing = dbs[service];
  if (existing) return existing;
  let db: SqlDatabase;
  if (env.DB_DRIVER === 'data-api') {
    const wait = options?.waitForResume ?? true;
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
        database: required(
          env,
          service === 'orders' ? 'DATA_API_DATABASE' : 'INVENTORY_DATA_API_DATABASE',
        ),
      },
      {
        transactionTimeouts: transactionTimeoutsOf(env),
        ...(wait
          ? {
              resumeWait: {
                ...DEFAULT_RESUME_WAIT,
                onResume: databaseResumeReporter(options?.service ?? 'unknown', options?.logger),
              },
            }
          : {}),
      },
    );
  } else {
    db = new PgDatabase({
      connectionString: serviceDatabaseUrls(env)[service],
      max: env.DB_POOL_MAX,
      transactionTimeouts: transactionTimeoutsOf(env),
    });
  }
  dbs[service] = db;
  return db;
}

/** The order service's database ({@link serviceDb}): the one a single-database function uses. */
export function sharedDb(options?: SharedDbOptions): SqlDatabase {
  return serviceDb('orders', options);
}

let brokerSecret: Promise<BrokerCredentials> | undefined;

/** The Amazon MQ credentials, read once from Secrets Manager (again after a failed read). */
function brokerCredentials(): Promise<BrokerCredentials> {
  const env = loadEnv();
  brokerSecret ??= readBrokerSecret(
    new SecretsManagerClient({ region: env.AWS_REGION }),
    required(env, 'BROKER_SECRET_ARN'),
  ).catch((err: unknown) => {
    brokerSecret = undefined;
    throw err;
  });
  return brokerSecret;
}

/** What every backend of a function needs beyond the environment (`BackendBase`). */
function backendBase(logger: Logger | undefined, transport: string) {
  const retention = loadRetention();
  return {
    budget: loadBudget(process.env, undefined, retention),
    retention,
    // who parks, in the diagnoses of parked messages
    consumer: `inventory@${CODE_VERSION}`,
    // the pipeline's streams and subscriptions
    topology: PIPELINE_TOPOLOGY,
    // a park the parking lot refused: the `ParkRefused` metric (EMF) and its alarm
    onParkRefused: (refused: Parameters<typeof publishParkRefused>[1]) =>
      publishParkRefused(transport, refused),
    ...(logger ? { logger } : {}),
  };
}

/**
 * The RabbitMQ backend: the Amazon MQ broker with credentials from Secrets Manager when
 * BROKER_SECRET_ARN is set (deployed), else AMQP_URL. Nothing connects until first use.
 */
export function sharedRabbit(logger?: Logger): RabbitMqBackend {
  rabbit ??= rabbitmqModule.create(
    rabbitmqConfigFromEnv(loadEnv(), {
      ...backendBase(logger, rabbitmqModule.name),
      connectionName: 'lambda',
      credentials: brokerCredentials,
    }),
  );
  return rabbit;
}

/** The SQS backend: the deployed pipeline's queue URLs from the environment. */
export function sharedSqs(logger?: Logger): SqsBackend {
  sqs ??= sqsModule.create(sqsModule.fromEnv(loadEnv(), backendBase(logger, sqsModule.name)));
  return sqs;
}

/**
 * The transports the stacks deploy, by the `TRANSPORT` a function is given: each function's
 * bundle carries only the backends it names (the relay: both).
 */
const DEPLOYED_BACKENDS = { rabbitmq: sharedRabbit, sqs: sharedSqs } as const;

/** The deployed transport's backend (`TRANSPORT`). */
export function sharedBackend(logger?: Logger): Backend {
  return DEPLOYED_BACKENDS[loadEnv().TRANSPORT](logger);
}

let kick: OutboxKick | undefined;

/**
 * The relay kick of a producer (RELAY_FUNCTION_NAME set by the stack): an asynchronous invocation
 * of the relay after a COMMIT that wrote outbox rows, at most one per RELAY_KICK_INTERVAL_MS from
 * this container. Without the variable (local runs of the sources), no kick.
 */
export function sharedKick(from: string, logger?: Logger): OutboxKick {
  const env = loadEnv();
  if (!env.RELAY_FUNCTION_NAME) return noKick;
  kick ??= new LambdaOutboxKick(
    { client: new LambdaClient({ region: env.AWS_REGION }), logger },
    { functionName: env.RELAY_FUNCTION_NAME, from, minIntervalMs: env.RELAY_KICK_INTERVAL_MS },
  );
  return kick;
}
