import { type RunningEventSource, startSchedule } from '../../devkit/lambda/eventSources.js';
import { LocalPipeline, synthesizedAssembly } from '../../devkit/lambda/localPipeline.js';
import { requireServices } from '../../devkit/preflight.js';
import { localTransport } from '../../devkit/transports/index.js';
import { loadEnv } from '../../shared/config/env.js';
import { serviceDatabaseUrls } from '../../shared/pipeline/schema.js';
import { vhostOf } from '../../shared/transport/rabbitmq/index.js';

/**
 * `npm run dev -- --bundles`: the deployment run locally from what `cdk synth` bundled (devkit/
 * lambda, docs/local-bundles.md): the migrations (and on RabbitMQ the broker topology) applied by
 * their custom resources, the HTTP API by the template's routes on `PORT`, the relay and
 * maintenance on their schedule rules, both consumers behind their event source mappings, every
 * function in Lambda-shaped Node 24 processes with its template's environment. The database is
 * `DATABASE_URL`'s (through the local Data API endpoint), the broker `AMQP_URL`'s virtual host,
 * the queues `SQS_QUEUE_PREFIX`'s on `SQS_ENDPOINT` or the embedded fauxqs server.
 */
export async function runBundles(opts: {
  transport: string;
  role: string;
  port?: string;
}): Promise<void> {
  const env = loadEnv();
  const local = localTransport(opts.transport);
  const deployedConsumers = local.deployed;
  if (!deployedConsumers) {
    console.error(`--bundles: nothing deploys ${local.name} (no stacks, no bundles)`);
    process.exit(2);
  }
  const all = opts.role === 'all';
  await requireServices({ postgres: env.DATABASE_URL, ...local.required(env, 'consume') });
  const { assembly, synth } = await synthesizedAssembly({
    transport: deployedConsumers.stack,
    log: (line) => console.log(line),
  });
  console.log(
    `bundles: ${synth.dir} (${synth.cached ? 'cached' : `cdk synth ${(synth.durationMs / 1000).toFixed(0)} s`})`,
  );
  const server = await local.startLocal?.(env);
  const vhost = vhostOf(env.AMQP_URL);
  const pipeline = await LocalPipeline.start(assembly, {
    name: 'rm_dev',
    services: {
      databaseUrl: env.DATABASE_URL,
      inventoryDatabaseUrl: serviceDatabaseUrls(env).inventory,
      amqpUrl: env.AMQP_URL,
      managementUrl: env.RABBITMQ_MANAGEMENT_URL,
      sqsEndpoint: server?.config.endpoint as string | undefined,
    },
    sqsQueuePrefix: env.SQS_QUEUE_PREFIX,
    vhost,
    onLog: (fn, line) => {
      // warnings and errors here; everything in the functions' log files
      if (/"level":"(WARN|ERROR|CRITICAL)"|^[A-Za-z.]*Error\b/.test(line))
        console.log(`[${fn}] ${line}`);
    },
  });
  const running: RunningEventSource[] = [];
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: stopping the functions and their triggers…`);
    // the functions first: an invocation in flight (a relay draining for 50 s) ends at once
    await pipeline.close();
    for (const r of running.reverse()) await r.stop().catch(() => {});
    await server?.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));

  const deployed = await pipeline.deploy();
  console.log(
    `deploy: ${deployed.map((r) => `${r.request.LogicalResourceId} ${r.status}`).join(', ')} (database users ${Object.values(pipeline.dbUsers).join(', ')})`,
  );
  const d = pipeline.deployment;
  if (all || opts.role === 'api') {
    const api = await d.startHttpApi(opts.port ? Number(opts.port) : env.PORT);
    console.log(`api: place-order bundle behind the template's routes on ${api.url}`);
  }
  if (all || opts.role === 'relay') {
    running.push(startSchedule(d, 'outbox-relay'), startSchedule(d, 'maintenance'));
    console.log('relay: outbox-relay and maintenance bundles on their schedule rules');
  }
  if (all || opts.role === 'consumer') {
    for (const id of Object.values(deployedConsumers.functions)) {
      running.push(
        await deployedConsumers.startEventSource(d, id, { amqpUrl: env.AMQP_URL, vhost }),
      );
    }
    console.log(
      `consumer: both consumer bundles behind their ${deployedConsumers.eventSourceName} event sources`,
    );
  }
  console.log(
    `logs: ${d.fn('outbox-relay').logFile.replace(/outbox-relay\.log$/, '<function>.log')}`,
  );
}
