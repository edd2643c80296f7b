import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { Command, Option } from 'commander';
import { type ConsumerSettings, startConsumer } from '../devkit/consumers.js';
import { startDataApiServer } from '../devkit/emulators/dataApiServer.js';
import { startHttpApi } from '../devkit/emulators/httpApi.js';
import { ensureLocalSqs } from '../devkit/emulators/sqsServer.js';
import { readAssembly } from '../devkit/lambda/assembly.js';
import {
  amazonMqEventSourceOf,
  deployedSettings,
  localEnvironment,
  scheduleOf,
  sqsEventSourceOf,
} from '../devkit/lambda/deployedSettings.js';
import { SQS_UNSCALED_CONCURRENCY } from '../devkit/lambda/eventSources.js';
import { templatesFor } from '../devkit/lambda/synth.js';
import { requireServices } from '../devkit/preflight.js';
import { localLambdaContext } from '../devkit/triggers/lambdaContext.js';
import { ScheduleTrigger } from '../devkit/triggers/scheduleTrigger.js';
import { createOutboxRelayHandler } from '../functions/outbox-relay/handler.js';
import { createPlaceOrderHandler } from '../functions/place-order/handler.js';
import { loadBudget } from '../shared/config/budget.js';
import { loadEnv, transactionTimeoutsOf } from '../shared/config/env.js';
import { CODE_VERSION } from '../shared/config/version.js';
import { Journal } from '../shared/consumer/journal.js';
import { DataApiDatabase, DEFAULT_RESUME_WAIT } from '../shared/db/data-api/DataApiDatabase.js';
import { TransientDbError } from '../shared/db/errors.js';
import { migrate } from '../shared/db/migrate.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import type { SqlDatabase } from '../shared/db/types.js';
import { INVENTORY_CONSUMER, ReserveInventory } from '../shared/inventory/ReserveInventory.js';
import { createLogger } from '../shared/logger.js';
import { loadRetention } from '../shared/maintenance/retention.js';
import { OrderResults } from '../shared/orders/OrderResults.js';
import { OrderService } from '../shared/orders/OrderService.js';
import { createRelays } from '../shared/outbox/relays.js';
import { backendFromEnv } from '../shared/transport/index.js';
import { backoffDelay, sleep } from '../shared/util/async.js';

/**
 * `npm run dev -- --transport rabbitmq|sqs [--role all|api|relay|consumer] [--consumer worker|lambda]`:
 * the local pipeline (README, Commands). Every role runs the same handlers and use cases as the Lambda
 * functions, with the settings the synthesized template gives them (each function's environment,
 * the event source mappings' batch size, window, concurrency and timeout, the relay's schedule),
 * unless a variable is set explicitly; `--consumer lambda` runs reserve-inventory behind the
 * Amazon MQ trigger emulation. `--bundles` runs the deployed bundles instead (bin/dev-bundles.ts).
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
      'SQL adapter: node-postgres, or the RDS Data API (DATA_API_ENDPOINT, or a local endpoint over DATABASE_URL)',
    )
      .choices(['pg', 'data-api'])
      .default('pg'),
  )
  .option('--port <port>', 'HTTP port (default: PORT or 3000)')
  .option(
    '--relay-loop',
    "drain the outboxes without pause instead of on the relay's schedule rule (benchmarks, soak)",
  )
  .option(
    '--bundles',
    'run the deployed bundles (cdk synth) in Lambda-shaped processes instead of the sources',
  )
  .parse();

const opts = program.opts<{
  transport: string;
  role: string;
  consumer: string;
  db: string;
  port?: string;
  bundles?: boolean;
  relayLoop?: boolean;
}>();

if (opts.bundles) {
  const { runBundles } = await import('./commands/devBundles.js');
  await runBundles(opts);
  // runs until SIGINT/SIGTERM
} else {
  await runSources();
}

async function runSources(): Promise<void> {
  const env = loadEnv();
  const transport = opts.transport as 'rabbitmq' | 'sqs';
  const runApi = opts.role === 'all' || opts.role === 'api';
  const runRelay = opts.role === 'all' || opts.role === 'relay';
  const runConsumer = opts.role === 'all' || opts.role === 'consumer';
  const logger = createLogger(`dev-${opts.role}`);

  await requireServices({
    postgres: env.DATABASE_URL,
    ...(opts.transport === 'rabbitmq' && (runRelay || runConsumer)
      ? { rabbitmq: env.AMQP_URL }
      : {}),
    ...(opts.transport === 'rabbitmq' && runConsumer
      ? { rabbitManagement: env.RABBITMQ_MANAGEMENT_URL }
      : {}),
  });

  // One source for the settings: the synthesized template (templates only, in-process, unless a
  // full synth of these sources is cached). Each role runs with its function's settings from
  // there (budget, retention, relay tuning, retry mode, timeout) and its trigger's; a variable set
  // explicitly in the environment wins.
  const templates = await templatesFor({ transport });
  const assembly = readAssembly(templates.dir);
  const deployed = deployedSettings(assembly);
  const fnEnv = (id: string) => loadEnv(localEnvironment(assembly.function(id), process.env));
  const consumerId = transport === 'sqs' ? 'reserve-inventory-sqs' : 'reserve-inventory-rabbitmq';
  const resultsId = transport === 'sqs' ? 'order-results-sqs' : 'order-results-rabbitmq';
  const consumerVars = localEnvironment(assembly.function(consumerId), process.env);
  const consumerEnv = loadEnv(consumerVars);
  const retention = loadRetention(consumerVars);
  const budget = loadBudget(consumerVars, undefined, retention);
  console.log(
    `settings: from the ${transport} template (${templates.bundled ? 'cached cdk synth' : 'synthesized in-process, no bundling'}); explicitly set variables win`,
  );

  const pgDb = new PgDatabase({
    connectionString: env.DATABASE_URL,
    max: env.DB_POOL_MAX,
    applicationName: `dev-${opts.role}`,
  });
  // Migrations are multi-statement scripts: always through node-postgres. A transient failure (a
  // terminated session, a database restarting) is retried for a while rather than ending the process.
  for (let attempt = 1; ; attempt++) {
    try {
      await migrate(pgDb);
      break;
    } catch (err) {
      if (!(err instanceof TransientDbError) || attempt >= 10) throw err;
      console.error(`migrations: ${(err as Error).message}; trying again (${attempt}/10)`);
      await sleep(backoffDelay(attempt, 200, 3_000));
    }
  }
  const stops: (() => Promise<void>)[] = [];
  let db: SqlDatabase = pgDb;
  /** The API's database: place-order answers a resuming cluster with 503 rather than waiting. */
  let apiDb: SqlDatabase = pgDb;
  if (opts.db === 'data-api') {
    // DATA_API_ENDPOINT: an endpoint someone else hosts (the soak's, shared by every role, which
    // may pause); else one of this process's own over DATABASE_URL
    const dataApi = env.DATA_API_ENDPOINT
      ? undefined
      : await startDataApiServer({ databaseUrl: env.DATABASE_URL });
    const endpoint = env.DATA_API_ENDPOINT ?? (dataApi?.endpoint as string);
    const rdsData = new RDSDataClient({
      endpoint,
      region: env.AWS_REGION,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    const target = {
      resourceArn: 'arn:aws:rds:local:000000000000:cluster:local',
      secretArn: 'arn:aws:secretsmanager:local:000000000000:secret:local',
      database: new URL(env.DATABASE_URL).pathname.slice(1),
    };
    // As deployed, every transaction is bounded: a role killed inside one leaves it open on a
    // shared endpoint (the service's own expiry is 3 minutes), holding its row locks until its
    // idle_in_transaction_session_timeout ends it. Every role but the API waits out a resume
    // (docs/design.md §12).
    const transactionTimeouts = transactionTimeoutsOf(env);
    db = new DataApiDatabase({ client: rdsData }, target, {
      transactionTimeouts,
      resumeWait: {
        ...DEFAULT_RESUME_WAIT,
        onResume: (e) =>
          logger[e.resumed ? 'info' : 'warn']('database resume met', { ...e, role: opts.role }),
      },
    });
    apiDb = new DataApiDatabase({ client: rdsData }, target, { transactionTimeouts });
    console.log(
      `db: RDS Data API through ${dataApi ? 'the local endpoint' : 'DATA_API_ENDPOINT'} ${endpoint}`,
    );
    stops.push(async () => {
      rdsData.destroy();
      await dataApi?.close();
    });
  }
  if (runApi) {
    const handler = createPlaceOrderHandler({ orders: new OrderService({ db: apiDb }), logger });
    const api = await startHttpApi(handler, { port: opts.port ? Number(opts.port) : env.PORT });
    console.log(
      `api: listening on ${api.url} (POST /orders, POST /orders/{id}/cancel, GET /orders/{id})`,
    );
    stops.push(api.close);
  }

  if (runRelay || runConsumer) {
    // SQS: SQS_ENDPOINT, or an embedded fauxqs server every local role shares.
    const local =
      transport === 'sqs'
        ? await ensureLocalSqs({ endpoint: env.SQS_ENDPOINT, port: env.SQS_LOCAL_PORT })
        : undefined;
    // the consumer function's settings (its retry mode; on SQS the consumed queue's visibility
    // timeout, which local queues are created with)
    const backend = backendFromEnv(transport, consumerEnv, {
      budget,
      retention,
      consumer: `${INVENTORY_CONSUMER}@${CODE_VERSION}`,
      logger,
      connectionName: `dev-${opts.role}`,
      ...(local ? { endpoint: local.endpoint } : {}),
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
      const relayEnv = fnEnv('outbox-relay');
      const relays = createRelays({ db, backend, logger }, relayEnv);
      const tables = relays.map((r) => r.store.table).join(' and ');
      if (opts.relayLoop) {
        const abort = new AbortController();
        const done = Promise.all(
          relays.map((r) =>
            r.drain({
              budgetMs: Number.MAX_SAFE_INTEGER,
              idleWaitMs: relayEnv.RELAY_IDLE_WAIT_MS,
              concurrency: relayEnv.RELAY_CONCURRENCY,
              signal: abort.signal,
            }),
          ),
        );
        console.log(`relay: draining ${tables} (${transport}) without pause`);
        stops.push(async () => {
          abort.abort();
          await done;
        });
      } else {
        // as deployed: the relay function on its schedule rule, each invocation draining for its
        // budget within its timeout
        const rule = scheduleOf(deployed, 'outbox-relay');
        const timeoutMs = assembly.function('outbox-relay').timeoutSeconds * 1000;
        const handler = createOutboxRelayHandler(
          { relays, logger },
          {
            drainBudgetMs: relayEnv.RELAY_DRAIN_BUDGET_MS,
            idleWaitMs: relayEnv.RELAY_IDLE_WAIT_MS,
            concurrency: relayEnv.RELAY_CONCURRENCY,
          },
        );
        const schedule = new ScheduleTrigger(
          {
            handler: (event) => handler(event, localLambdaContext('outbox-relay', timeoutMs)),
            logger,
          },
          {
            rateMs: rule.rateMs ?? 60_000,
            ruleArn: `arn:aws:events:local:000000000000:rule/${rule.logicalId}`,
          },
        );
        schedule.start();
        console.log(
          `relay: draining ${tables} (${transport}) on its schedule, ${rule.expression}: ${relayEnv.RELAY_DRAIN_BUDGET_MS} ms of each ${timeoutMs / 1000} s invocation`,
        );
        // the invocation in flight is not waited for: its round's transaction ends with the process
        stops.push(() => schedule.stop({ wait: false }));
      }
    }

    if (runConsumer) {
      const journal = new Journal(logger);
      const useCase = new ReserveInventory({ db, logger, journal }, { budget });
      const mode = transport === 'sqs' || opts.consumer === 'lambda' ? 'lambda' : 'worker';
      const consumer = await startConsumer(backend, (m) => useCase.process(m), {
        mode,
        journal,
        logger,
        ...(mode === 'worker'
          ? { concurrency: env.CONSUMER_CONCURRENCY, prefetch: env.CONSUMER_PREFETCH }
          : triggerSettings(consumerId)),
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
      // The order side hears inventory's results: GET /orders/{id} shows the reservation status.
      const results = new OrderResults({ db, logger, journal });
      const resultsConsumer = await startConsumer(backend, (m) => results.process(m), {
        mode,
        queue: 'results',
        journal,
        logger,
        ...(mode === 'worker' ? {} : triggerSettings(resultsId)),
      });
      stops.push(() => resultsConsumer.stop());
      console.log('consumer: order-results on the results queue (order status from the events)');
    }
  }

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: finishing in-flight work…`);
    for (const stop of [...stops].reverse()) await stop(); // last started, first stopped
    await pgDb.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));

  /**
   * A Lambda trigger emulation's settings: the function's event source mapping in the template
   * (batch size, window, concurrency, partial batch responses, the function's timeout), each one
   * replaced by its variable when that is set.
   */
  function triggerSettings(functionId: string): ConsumerSettings {
    if (transport === 'sqs') {
      const m = sqsEventSourceOf(deployed, functionId);
      return {
        batchSize: env.SQS_BATCH_SIZE ?? m.batchSize,
        batchWindowMs: env.SQS_BATCH_WINDOW_MS ?? m.batchWindowMs,
        concurrency: env.SQS_MAX_CONCURRENCY ?? m.maxConcurrency ?? SQS_UNSCALED_CONCURRENCY,
        functionTimeoutMs: fnEnv(functionId).FUNCTION_TIMEOUT_MS,
        reportBatchItemFailures: m.reportBatchItemFailures,
      };
    }
    const m = amazonMqEventSourceOf(deployed, functionId);
    return {
      batchSize: env.MQ_BATCH_SIZE ?? m.batchSize,
      batchWindowMs: env.MQ_BATCH_WINDOW_MS ?? m.batchWindowMs,
      functionTimeoutMs: fnEnv(functionId).FUNCTION_TIMEOUT_MS,
    };
  }
}
