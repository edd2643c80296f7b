import { Command, Option } from 'commander';
import { createPlaceOrderHandler } from '../functions/place-order/handler.js';
import { loadEnv } from '../shared/config/env.js';
import { migrate } from '../shared/db/migrate.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { startHttpApi } from '../shared/local/httpServer.js';
import {
  checkPostgres,
  checkRabbitMq,
  describeProblem,
  type ServiceProblem,
} from '../shared/local/preflight.js';
import { createLogger } from '../shared/logger.js';
import { OrderService } from '../shared/orders/OrderService.js';
import { createRabbitRelays } from '../shared/outbox/rabbitRelays.js';
import { RabbitConnection } from '../shared/transport/rabbitmq/RabbitConnection.js';
import { declareTopology } from '../shared/transport/rabbitmq/topology.js';

/**
 * `npm run dev -- --transport rabbitmq [--role all|api|relay]`: the local pipeline (DESIGN §10).
 * Every role runs the same handlers and use cases the Lambda functions run.
 */
const program = new Command('dev')
  .description('run the local pipeline: HTTP API, outbox relay (and, later, the consumer)')
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
  .option('--port <port>', 'HTTP port (default: PORT or 3000)')
  .parse();

const opts = program.opts<{ transport: string; role: string; port?: string }>();
if (opts.transport === 'sqs') {
  program.error(
    '--transport sqs is not available yet (the SQS transport is issue #4); use --transport rabbitmq',
  );
}
if (opts.role === 'consumer') {
  program.error(
    '--role consumer is not available yet (the consumer is issue #3); use --role api or relay',
  );
}

const env = loadEnv();
const runApi = opts.role === 'all' || opts.role === 'api';
const runRelay = opts.role === 'all' || opts.role === 'relay';
const logger = createLogger(`dev-${opts.role}`);

const problems = [
  await checkPostgres(env.DATABASE_URL),
  runRelay ? await checkRabbitMq(env.AMQP_URL) : undefined,
].filter(Boolean) as ServiceProblem[];
if (problems.length > 0) {
  for (const p of problems) console.error(describeProblem(p));
  process.exit(2);
}

const db = new PgDatabase({
  connectionString: env.DATABASE_URL,
  max: env.DB_POOL_MAX,
  applicationName: `dev-${opts.role}`,
});
await migrate(db);
const stops: (() => Promise<void>)[] = [];
const abort = new AbortController();

if (runApi) {
  const handler = createPlaceOrderHandler({ orders: new OrderService({ db }), logger });
  const api = await startHttpApi(handler, { port: opts.port ? Number(opts.port) : env.PORT });
  console.log(
    `api: listening on ${api.url} (POST /orders, POST /orders/{id}/cancel, GET /orders/{id})`,
  );
  stops.push(api.close);
}

let relaysDone: Promise<unknown> | undefined;
if (runRelay) {
  const connection = new RabbitConnection(
    { url: env.AMQP_URL, connectionName: 'dev-relay' },
    logger,
  );
  await connection.withChannel((ch) => declareTopology(ch), 10_000);
  const relays = createRabbitRelays({ db, connection, logger }, env);
  console.log(
    `relay: draining ${relays.map((r) => r.store.table).join(' and ')} to ${new URL(env.AMQP_URL).host}`,
  );
  relaysDone = Promise.all(
    relays.map((r) =>
      r.drain({
        budgetMs: Number.MAX_SAFE_INTEGER,
        idleWaitMs: env.RELAY_IDLE_WAIT_MS,
        concurrency: env.RELAY_CONCURRENCY,
        signal: abort.signal,
      }),
    ),
  );
  stops.push(async () => {
    await relaysDone;
    await connection.close();
  });
}

let stopping = false;
const shutdown = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  console.log(`${signal}: finishing in-flight work…`);
  abort.abort();
  for (const stop of stops) await stop();
  await db.close();
  process.exit(0);
};
process.on('SIGINT', () => void shutdown('SIGINT'));
process.on('SIGTERM', () => void shutdown('SIGTERM'));
