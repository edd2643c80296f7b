import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { Command, Option } from 'commander';
import { startConsumer } from '../devkit/consumers.js';
import { startDataApiServer } from '../devkit/emulators/dataApiServer.js';
import { startHttpApi } from '../devkit/emulators/httpApi.js';
import { ensureLocalSqs } from '../devkit/emulators/sqsServer.js';
import { requireServices } from '../devkit/preflight.js';
import { createPlaceOrderHandler } from '../functions/place-order/handler.js';
import { loadBudget } from '../shared/config/budget.js';
import { loadEnv } from '../shared/config/env.js';
import { CODE_VERSION } from '../shared/config/version.js';
import { Journal } from '../shared/consumer/journal.js';
import { DataApiDatabase } from '../shared/db/data-api/DataApiDatabase.js';
import { migrate } from '../shared/db/migrate.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import type { SqlDatabase } from '../shared/db/types.js';
import { INVENTORY_CONSUMER, ReserveInventory } from '../shared/inventory/ReserveInventory.js';
import { createLogger } from '../shared/logger.js';
import { loadRetention } from '../shared/maintenance/retention.js';
import { OrderService } from '../shared/orders/OrderService.js';
import type { OutboxRelay } from '../shared/outbox/OutboxRelay.js';
import { createRelays } from '../shared/outbox/relays.js';
import { backendFromEnv } from '../shared/transport/index.js';

/**
 * `npm run dev -- --transport rabbitmq|sqs [--role all|api|relay|consumer] [--consumer worker|lambda]`:
 * the local pipeline (README, Commands). Every role runs the same handlers and use cases as the Lambda
 * functions; `--consumer lambda` runs reserve-inventory behind the Amazon MQ trigger emulation.
 */
const program = new Command('dev')
  .description('run the local pipeline: HTTP API, outbox relay and inventory consumer')
  .addOption(
    new Option('--transport <transport>', 'message transport')
      .choices(['rabbitmq', 'sqs'])
      .default('rabbitmq'),
  )
  .addOption(
    new Option('--role <role>', 'what to run')
      .choices(['all', 'api', 'relay', 'consumer'])
      .default('all'),
  )
  .addOption(
    new Option('--consumer <mode>', 'consumer mode: worker, or the Amazon MQ trigger emulation')
      .choices(['worker', 'lambda'])
      .default('worker'),
  )
  .addOption(
    new Option(
      '--db <adapter>',
      'SQL adapter: node-postgres, or the RDS Data API (local endpoint over DATABASE_URL)',
    )
      .choices(['pg', 'data-api'])
      .default('pg'),
  )
  .option('--port <port>', 'HTTP port (default: PORT or 3000)')
  .parse();

const opts = program.opts<{
  transport: string;
  role: string;
  consumer: string;
  db: string;
  port?: string;
}>();

const env = loadEnv();
const retention = loadRetention();
const budget = loadBudget(process.env, undefined, retention);
const runApi = opts.role === 'all' || opts.role === 'api';
const runRelay = opts.role === 'all' || opts.role === 'relay';
const runConsumer = opts.role === 'all' || opts.role === 'consumer';
const logger = createLogger(`dev-${opts.role}`);

await requireServices({
  postgres: env.DATABASE_URL,
  ...(opts.transport === 'rabbitmq' && (runRelay || runConsumer) ? { rabbitmq: env.AMQP_URL } : {}),
  ...(opts.transport === 'rabbitmq' && runConsumer
    ? { rabbitManagement: env.RABBITMQ_MANAGEMENT_URL }
    : {}),
});

const pgDb = new PgDatabase({
  connectionString: env.DATABASE_URL,
  max: env.DB_POOL_MAX,
  applicationName: `dev-${opts.role}`,
});
await migrate(pgDb); // migrations are multi-statement scripts: always through node-postgres
const stops: (() => Promise<void>)[] = [];
let db: SqlDatabase = pgDb;
if (opts.db === 'data-api') {
  const dataApi = await startDataApiServer({ databaseUrl: env.DATABASE_URL });
  const rdsData = new RDSDataClient({
    endpoint: dataApi.endpoint,
    region: env.AWS_REGION,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  db = new DataApiDatabase(
    { client: rdsData },
    {
      resourceArn: 'arn:aws:rds:local:000000000000:cluster:local',
      secretArn: 'arn:aws:secretsmanager:local:000000000000:secret:local',
      database: new URL(env.DATABASE_URL).pathname.slice(1),
    },
  );
  console.log(`db: RDS Data API through the local endpoint ${dataApi.endpoint}`);
  stops.push(async () => {
    rdsData.destroy();
    await dataApi.close();
  });
}
const abort = new AbortController();

/** Runs relays until SIGINT/SIGTERM; the round in flight finishes. */
const drainUntilStopped = (relays: OutboxRelay[]) =>
  Promise.all(
    relays.map((r) =>
      r.drain({
        budgetMs: Number.MAX_SAFE_INTEGER,
        idleWaitMs: env.RELAY_IDLE_WAIT_MS,
        concurrency: env.RELAY_CONCURRENCY,
        signal: abort.signal,
      }),
    ),
  );

if (runApi) {
  const handler = createPlaceOrderHandler({ orders: new OrderService({ db }), logger });
  const api = await startHttpApi(handler, { port: opts.port ? Number(opts.port) : env.PORT });
  console.log(
    `api: listening on ${api.url} (POST /orders, POST /orders/{id}/cancel, GET /orders/{id})`,
  );
  stops.push(api.close);
}

if (runRelay || runConsumer) {
  const transport = opts.transport as 'rabbitmq' | 'sqs';
  // SQS: SQS_ENDPOINT, or an embedded fauxqs server every local role shares.
  const local =
    transport === 'sqs'
      ? await ensureLocalSqs({ endpoint: env.SQS_ENDPOINT, port: env.SQS_LOCAL_PORT })
      : undefined;
  const backend = backendFromEnv(transport, env, {
    budget,
    retention,
    consumer: `${INVENTORY_CONSUMER}@${CODE_VERSION}`,
    logger,
    rabbitmq: { connectionName: `dev-${opts.role}` },
    ...(local ? { sqs: { endpoint: local.endpoint } } : {}),
  });
  stops.push(async () => {
    await backend.close();
    await local?.stop();
  });
  await backend.prepare(runConsumer ? 'consume' : 'publish').catch((err: unknown) => {
    // one line, as for the other services, rather than a stack trace
    console.error(
      transport === 'sqs'
        ? `SQS server at ${local?.endpoint} did not answer (${(err as Error).message}): start it, or unset SQS_ENDPOINT to use the embedded server`
        : `RabbitMQ topology could not be declared (${(err as Error).message})`,
    );
    process.exit(2);
  });
  if (local)
    console.log(
      `sqs: ${local.embedded ? 'embedded fauxqs server' : 'server'} at ${local.endpoint}`,
    );

  if (runRelay) {
    const relays = createRelays({ db, backend, logger }, env);
    console.log(`relay: draining ${relays.map((r) => r.store.table).join(' and ')} (${transport})`);
    const done = drainUntilStopped(relays);
    stops.push(async () => {
      await done;
    });
  }

  if (runConsumer) {
    const journal = new Journal(logger);
    const useCase = new ReserveInventory({ db, logger, journal }, { budget });
    const mode = transport === 'sqs' || opts.consumer === 'lambda' ? 'lambda' : 'worker';
    const consumer = await startConsumer(backend, (m) => useCase.process(m), {
      mode,
      journal,
      logger,
      ...(transport === 'rabbitmq'
        ? mode === 'worker'
          ? { concurrency: env.CONSUMER_CONCURRENCY, prefetch: env.CONSUMER_PREFETCH }
          : { batchSize: env.MQ_BATCH_SIZE, batchWindowMs: env.MQ_BATCH_WINDOW_MS }
        : {
            batchSize: env.SQS_BATCH_SIZE,
            batchWindowMs: env.SQS_BATCH_WINDOW_MS,
            concurrency: env.SQS_MAX_CONCURRENCY,
            functionTimeoutMs: env.FUNCTION_TIMEOUT_MS,
          }),
    });
    stops.push(() => consumer.stop());
    const how =
      transport === 'sqs'
        ? `SQS trigger emulation (${env.SQS_RETRY_MODE} mode)`
        : mode === 'lambda'
          ? 'Amazon MQ trigger emulation'
          : `worker ×${env.CONSUMER_CONCURRENCY}`;
    console.log(
      `consumer: ${how} on the inventory queue (retry ladder ${budget.ladderMs.join('/')} ms)`,
    );
  }
}

let stopping = false;
const shutdown = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  console.log(`${signal}: finishing in-flight work…`);
  abort.abort();
  for (const stop of [...stops].reverse()) await stop(); // last started, first stopped
  await pgDb.close();
  process.exit(0);
};
process.on('SIGINT', () => void shutdown('SIGINT'));
process.on('SIGTERM', () => void shutdown('SIGTERM'));
