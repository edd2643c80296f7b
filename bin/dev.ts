import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { Command, Option } from 'commander';
import { type ConsumerSettings, startConsumer } from '../devkit/consumers.js';
import { startDataApiServer } from '../devkit/emulators/dataApiServer.js';
import { startHttpApi } from '../devkit/emulators/httpApi.js';
import { readAssembly } from '../devkit/lambda/assembly.js';
import {
  deployedSettings,
  localEnvironment,
  scheduleOf,
} from '../devkit/lambda/deployedSettings.js';
import { templatesFor } from '../devkit/lambda/synth.js';
import { requireServices } from '../devkit/preflight.js';
import { ensureLocalDatabase } from '../devkit/scratch.js';
import {
  type LocalTransport,
  localTransport,
  SHARED_TRANSPORTS,
} from '../devkit/transports/index.js';
import { localLambdaContext } from '../devkit/triggers/lambdaContext.js';
import { ScheduleTrigger } from '../devkit/triggers/scheduleTrigger.js';
import { createPlaceOrderHandler } from '../functions/place-order/handler.js';
import { loadBudget, type Retention, type RetryBudget } from '../shared/config/budget.js';
import { type Env, loadEnv, transactionTimeoutsOf } from '../shared/config/env.js';
import { Journal } from '../shared/consumer/journal.js';
import { DataApiDatabase, DEFAULT_RESUME_WAIT } from '../shared/db/data-api/DataApiDatabase.js';
import { TransientDbError } from '../shared/db/errors.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import type { SqlDatabase } from '../shared/db/types.js';
import { INVENTORY_CONSUMER, ReserveInventory } from '../shared/inventory/ReserveInventory.js';
import { createLogger } from '../shared/logger.js';
import { loadRetention } from '../shared/maintenance/retention.js';
import { OrderResults } from '../shared/orders/OrderResults.js';
import { OrderService } from '../shared/orders/OrderService.js';
import { relayLambdaHandler } from '../shared/outbox/lambdaHandler.js';
import { createRelays } from '../shared/pipeline/relays.js';
import {
  migrateService,
  SERVICES,
  type Service,
  serviceDatabaseUrls,
} from '../shared/pipeline/schema.js';
import { PIPELINE_TOPOLOGY } from '../shared/pipeline/topology.js';
import { CODE_VERSION } from '../shared/pipeline/version.js';
import type { Backend } from '../shared/port/types.js';
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
      .choices(SHARED_TRANSPORTS)
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

/** The roles this process runs. */
const roles = {
  api: opts.role === 'all' || opts.role === 'api',
  relay: opts.role === 'all' || opts.role === 'relay',
  consumer: opts.role === 'all' || opts.role === 'consumer',
};

/** The stacks' relay schedule rule: one tick a minute (infra). */
const RELAY_SCHEDULE_MS = 60_000;

/** What each role started, stopped in reverse order on SIGINT/SIGTERM. */
const stops: (() => Promise<void>)[] = [];
const logger = createLogger(`dev-${opts.role}`);

if (opts.bundles) {
  const { runBundles } = await import('./commands/devBundles.js');
  await runBundles(opts);
  // runs until SIGINT/SIGTERM
} else {
  await runSources();
}

async function runSources(): Promise<void> {
  const env = loadEnv();
  const local = localTransport(opts.transport);
  const usesBroker = roles.relay || roles.consumer;
  await requireServices({
    postgres: env.DATABASE_URL,
    ...(usesBroker ? local.required(env, roles.consumer ? 'consume' : 'publish') : {}),
  });
  const settings = await functionSettings(local, env);
  console.log(`settings: ${settings.source}; explicitly set variables win`);
  const { pgDbs, dbs, apiDb } = await startDatabases(env);
  if (roles.api) await startApi(apiDb, env);
  if (usesBroker) {
    const backend = await startBackend(local, settings);
    if (roles.relay) startRelay(settings, dbs, backend);
    if (roles.consumer) await startConsumers(local, settings, dbs, backend);
  }
  stopOnSignals(pgDbs);
}

/** Where each role's settings come from, and what they are. */
interface FunctionSettings {
  /** One line: the template, or the environment. */
  source: string;
  budget: RetryBudget;
  retention: Retention;
  /** The consumer function's environment (its retry mode, the consumed queue's settings). */
  consumerEnv: Env;
  /** A function's environment by id (`outbox-relay`, …). */
  fnEnv(id: string): Env;
  /** The relay function's schedule rule and timeout. */
  relay: { expression: string; rateMs: number; ruleArn: string; timeoutMs: number };
  /** The consumer functions' event source settings (a transport the stacks deploy). */
  trigger?(functionId: string): ConsumerSettings;
}

/**
 * One source for the settings: the synthesized template of a transport the stacks deploy
 * (templates only, in-process, unless a full synth of these sources is cached), each role with
 * its function's settings from there (budget, retention, relay tuning, retry mode, timeout) and
 * its trigger's; else (a local-only transport) the environment and the stacks' relay schedule.
 */
async function functionSettings(local: LocalTransport, env: Env): Promise<FunctionSettings> {
  const deployedConsumers = local.deployed;
  if (!deployedConsumers) {
    const retention = loadRetention(process.env);
    return {
      source: `the environment (nothing deploys ${local.name}: no template)`,
      budget: loadBudget(process.env, undefined, retention),
      retention,
      consumerEnv: env,
      fnEnv: () => env,
      relay: {
        expression: 'rate(1 minute)',
        rateMs: RELAY_SCHEDULE_MS,
        ruleArn: 'arn:aws:events:local:000000000000:rule/outbox-relay',
        timeoutMs: RELAY_SCHEDULE_MS,
      },
    };
  }
  const templates = await templatesFor({ transport: deployedConsumers.stack });
  const assembly = readAssembly(templates.dir);
  const deployed = deployedSettings(assembly);
  const fnEnv = (id: string) => loadEnv(localEnvironment(assembly.function(id), process.env));
  const consumerVars = localEnvironment(
    assembly.function(deployedConsumers.functions.inventory),
    process.env,
  );
  const retention = loadRetention(consumerVars);
  const rule = scheduleOf(deployed, 'outbox-relay');
  return {
    source: `from the ${local.name} template (${templates.bundled ? 'cached cdk synth' : 'synthesized in-process, no bundling'})`,
    budget: loadBudget(consumerVars, undefined, retention),
    retention,
    consumerEnv: loadEnv(consumerVars),
    fnEnv,
    relay: {
      expression: rule.expression,
      rateMs: rule.rateMs ?? RELAY_SCHEDULE_MS,
      ruleArn: `arn:aws:events:local:000000000000:rule/${rule.logicalId}`,
      timeoutMs: assembly.function('outbox-relay').timeoutSeconds * 1000,
    },
    trigger: (functionId) =>
      deployedConsumers.triggerSettings(deployed, functionId, env, fnEnv(functionId)),
  };
}

/**
 * Each service's database (DATABASE_URL: orders; INVENTORY_DATABASE_URL, by default beside it:
 * inventory), created if missing and migrated with that service's schema, through node-postgres
 * (a transient failure retried for a while rather than ending the process); with
 * `--db data-api`, the roles reach them through the RDS Data API.
 */
async function startDatabases(env: Env): Promise<{
  pgDbs: PgDatabase[];
  dbs: Record<Service, SqlDatabase>;
  apiDb: SqlDatabase;
}> {
  const urls = serviceDatabaseUrls(env);
  const pg = {} as Record<Service, PgDatabase>;
  for (const service of SERVICES) {
    // Migrations are multi-statement scripts: always through node-postgres.
    for (let attempt = 1; ; attempt++) {
      try {
        await ensureLocalDatabase(urls[service]);
        pg[service] ??= new PgDatabase({
          connectionString: urls[service],
          max: env.DB_POOL_MAX,
          applicationName: `dev-${opts.role}`,
        });
        await migrateService(pg[service], service);
        break;
      } catch (err) {
        if (!(err instanceof TransientDbError) || attempt >= 10) throw err;
        console.error(`migrations: ${(err as Error).message}; trying again (${attempt}/10)`);
        await sleep(backoffDelay(attempt, 200, 3_000));
      }
    }
  }
  const pgDbs = SERVICES.map((s) => pg[s]);
  if (opts.db !== 'data-api') return { pgDbs, dbs: pg, apiDb: pg.orders };
  return { pgDbs, ...(await startDataApi(env, urls)) };
}

/**
 * The RDS Data API: DATA_API_ENDPOINT (an endpoint someone else hosts, the soak's, shared by
 * every role, which may pause), else one of this process's own over DATABASE_URL. As deployed,
 * every transaction is bounded: a role killed inside one leaves it open on a shared endpoint (the
 * service's own expiry is 3 minutes), holding its row locks until its
 * idle_in_transaction_session_timeout ends it. Every role but the API waits out a resume
 * (docs/design.md §12); the API answers 503 at once.
 */
async function startDataApi(
  env: Env,
  urls: Record<Service, string>,
): Promise<{ dbs: Record<Service, SqlDatabase>; apiDb: SqlDatabase }> {
  const dataApi = env.DATA_API_ENDPOINT
    ? undefined
    : await startDataApiServer({ databaseUrl: env.DATABASE_URL });
  const endpoint = env.DATA_API_ENDPOINT ?? (dataApi?.endpoint as string);
  const rdsData = new RDSDataClient({
    endpoint,
    region: env.AWS_REGION,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  // one cluster, each service's database by name (the local endpoint serves each by its name)
  const target = (service: Service) => ({
    resourceArn: 'arn:aws:rds:local:000000000000:cluster:local',
    secretArn: 'arn:aws:secretsmanager:local:000000000000:secret:local',
    database: decodeURIComponent(new URL(urls[service]).pathname.slice(1)),
  });
  const transactionTimeouts = transactionTimeoutsOf(env);
  const dbOf = (service: Service) =>
    new DataApiDatabase({ client: rdsData }, target(service), {
      transactionTimeouts,
      resumeWait: {
        ...DEFAULT_RESUME_WAIT,
        onResume: (e) =>
          logger[e.resumed ? 'info' : 'warn']('database resume met', { ...e, role: opts.role }),
      },
    });
  const dbs = { orders: dbOf('orders'), inventory: dbOf('inventory') };
  const apiDb = new DataApiDatabase({ client: rdsData }, target('orders'), { transactionTimeouts });
  console.log(
    `db: RDS Data API through ${dataApi ? 'the local endpoint' : 'DATA_API_ENDPOINT'} ${endpoint}`,
  );
  stops.push(async () => {
    rdsData.destroy();
    await dataApi?.close();
  });
  return { dbs, apiDb };
}

async function startApi(db: SqlDatabase, env: Env): Promise<void> {
  const handler = createPlaceOrderHandler({ orders: new OrderService({ db }), logger });
  const api = await startHttpApi(handler, { port: opts.port ? Number(opts.port) : env.PORT });
  console.log(
    `api: listening on ${api.url} (POST /orders, POST /orders/{id}/cancel, GET /orders/{id})`,
  );
  stops.push(api.close);
}

/**
 * The transport's backend with the consumer function's settings (its retry mode; on SQS the
 * consumed queue's visibility timeout, which local queues are created with), on what the
 * transport needs started locally (SQS: `SQS_ENDPOINT` or an embedded server), prepared.
 */
async function startBackend(local: LocalTransport, settings: FunctionSettings): Promise<Backend> {
  const server = await local.startLocal?.(settings.consumerEnv);
  const backend = backendFromEnv(local.name, settings.consumerEnv, {
    budget: settings.budget,
    retention: settings.retention,
    topology: PIPELINE_TOPOLOGY,
    consumer: `${INVENTORY_CONSUMER}@${CODE_VERSION}`,
    logger,
    connectionName: `dev-${opts.role}`,
    ...server?.config,
  });
  stops.push(async () => {
    await backend.close();
    await server?.stop();
  });
  await backend.prepare(roles.consumer ? 'consume' : 'publish').catch((err: unknown) => {
    // one line, as for the other services, rather than a stack trace
    console.error(
      `${local.name}: could not declare what the pipeline needs (${(err as Error).message})${server ? `; ${server.line}` : ''}`,
    );
    process.exit(2);
  });
  if (server) console.log(server.line);
  return backend;
}

/** The relay: on its schedule rule as deployed, or draining without pause (`--relay-loop`). */
function startRelay(
  settings: FunctionSettings,
  dbs: Record<Service, SqlDatabase>,
  backend: Backend,
): void {
  const relayEnv = settings.fnEnv('outbox-relay');
  const relays = createRelays({ db: dbs, backend, logger }, relayEnv);
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
    console.log(`relay: draining ${tables} (${backend.transport}) without pause`);
    stops.push(async () => {
      abort.abort();
      await done;
    });
    return;
  }
  // as deployed: the relay function on its schedule rule, each invocation draining for its
  // budget within its timeout
  const { relay } = settings;
  const handler = relayLambdaHandler(
    { relays, logger },
    {
      drainBudgetMs: relayEnv.RELAY_DRAIN_BUDGET_MS,
      idleWaitMs: relayEnv.RELAY_IDLE_WAIT_MS,
      concurrency: relayEnv.RELAY_CONCURRENCY,
    },
  );
  const schedule = new ScheduleTrigger(
    {
      handler: (event) => handler(event, localLambdaContext('outbox-relay', relay.timeoutMs)),
      logger,
    },
    { rateMs: relay.rateMs, ruleArn: relay.ruleArn },
  );
  schedule.start();
  console.log(
    `relay: draining ${tables} (${backend.transport}) on its schedule, ${relay.expression}: ${relayEnv.RELAY_DRAIN_BUDGET_MS} ms of each ${relay.timeoutMs / 1000} s invocation`,
  );
  // the invocation in flight is not waited for: its round's transaction ends with the process
  stops.push(() => schedule.stop({ wait: false }));
}

/**
 * Inventory's reserve consumer and the order side's results consumer: in this process (worker),
 * or the deployed functions' handlers behind their event source's emulation (`--consumer lambda`,
 * and always where the transport has no worker).
 */
async function startConsumers(
  local: LocalTransport,
  settings: FunctionSettings,
  dbs: Record<Service, SqlDatabase>,
  backend: Backend,
): Promise<void> {
  const env = settings.consumerEnv;
  const lambda =
    opts.consumer === 'lambda' || !backend.capabilities.consumeModes.includes('worker');
  const deployed = local.deployed;
  if (lambda && (!deployed || !settings.trigger)) {
    console.error(
      `${local.name}: no Lambda event source (nothing deploys it); use --consumer worker`,
    );
    process.exit(2);
  }
  const journal = new Journal(logger);
  const useCase = new ReserveInventory(
    { db: dbs.inventory, logger, journal },
    { budget: settings.budget },
  );
  /** Both consumers' settings: the worker's, or their function's event source's. */
  const settingsOf = (id: 'inventory' | 'results'): ConsumerSettings => ({
    mode: lambda ? 'lambda' : 'worker',
    journal,
    logger,
    ...(lambda && deployed && settings.trigger ? settings.trigger(deployed.functions[id]) : {}),
  });
  const consumer = await startConsumer(backend, (m) => useCase.process(m), {
    ...settingsOf('inventory'),
    ...(lambda ? {} : { concurrency: env.CONSUMER_CONCURRENCY, prefetch: env.CONSUMER_PREFETCH }),
  });
  stops.push(() => consumer.stop());
  const how = lambda && deployed ? deployed.describe(env) : `worker ×${env.CONSUMER_CONCURRENCY}`;
  console.log(
    `consumer: ${how} on the inventory queue (retry ladder ${settings.budget.ladderMs.join('/')} ms)`,
  );
  // The order side hears inventory's results: GET /orders/{id} shows the reservation status.
  const results = new OrderResults({ db: dbs.orders, logger, journal });
  const resultsConsumer = await startConsumer(backend, (m) => results.process(m), {
    ...settingsOf('results'),
    queue: 'results',
  });
  stops.push(() => resultsConsumer.stop());
  console.log('consumer: order-results on the results queue (order status from the events)');
}

/** SIGINT/SIGTERM: in-flight work finishes, the last started stops first. */
function stopOnSignals(pgDbs: readonly PgDatabase[]): void {
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: finishing in-flight work…`);
    for (const stop of [...stops].reverse()) await stop();
    for (const db of pgDbs) await db.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}
