import { startMotoServer } from '../devkit/emulators/motoServer.js';
import type { DeployedAssembly } from '../devkit/lambda/assembly.js';
import { LocalPipeline } from '../devkit/lambda/localPipeline.js';
import { createScratchDatabase, type ScratchDatabase } from '../devkit/scratch.js';
import { type DeployedConsumers, localTransport } from '../devkit/transports/index.js';
import type { ScratchVhost } from '../devkit/transports/types.js';
import type { Env } from '../shared/config/env.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { inventoryDatabaseUrl } from '../shared/pipeline/schema.js';
import { isTransportName } from '../shared/transport/index.js';

/** The transports the stacks deploy (`-c transport=…`). */
export type DeployedTransport = DeployedConsumers['stack'];

/** Those of `names` the stacks deploy, in order (local-only and unknown names left out). */
export const deployedTransports = (names: readonly string[]): DeployedTransport[] =>
  names.flatMap((n) => {
    const stack = isTransportName(n) ? localTransport(n).deployed?.stack : undefined;
    return stack ? [stack] : [];
  });

/**
 * How each deployed stack's broker is billed: SQS by the request; Amazon MQ by the broker-hour,
 * the functions in its VPC reaching AWS through a NAT gateway.
 */
export const BROKER_BILLING: Record<DeployedTransport, 'requests' | 'broker-hours'> = {
  sqs: 'requests',
  rabbitmq: 'broker-hours',
};

/** Calls of a service (`sqs`, `rds-data`, …) by `service:operation`, summed over its operations. */
export function ofService(counts: Record<string, number>, service: string): number {
  return Object.entries(counts)
    .filter(([k]) => k.startsWith(`${service}:`))
    .reduce((a, [, n]) => a + n, 0);
}

export interface DeployedForBench {
  /** The order service's database (the stack's default database). */
  db: ScratchDatabase;
  /** The inventory service's, which the stack's migrate function created beside it. */
  inventoryDb: PgDatabase;
  vhost: ScratchVhost | undefined;
  pipeline: LocalPipeline;
  /** Undoes everything, last first (the caller adds its own and runs them in reverse). */
  closers: (() => Promise<unknown>)[];
}

/**
 * A synthesized stack stood up locally for a benchmark, every AWS call counted: a scratch
 * database the stack's own migrate custom resource fills, the transport's local server (SQS: one
 * of its own, on a free port) and its namespace (RabbitMQ: a virtual host), moto for Secrets
 * Manager and SSM, the pipeline deployed (bench/relayDeployed.ts, bench/cost.ts). On failure what
 * was created is removed again.
 */
export async function deployForBench(
  env: Env,
  transport: DeployedTransport,
  assembly: DeployedAssembly,
  name: string,
  options: { onLog?: (functionName: string, line: string) => void } = {},
): Promise<DeployedForBench> {
  const db = await createScratchDatabase(env.DATABASE_URL, name, { migrated: false });
  const closers: (() => Promise<unknown>)[] = [() => db.drop()];
  try {
    const local = localTransport(transport);
    const server = await local.startLocal?.({ ...env, SQS_LOCAL_PORT: 0 });
    if (server) closers.push(() => server.stop());
    const services = {
      databaseUrl: db.url,
      amqpUrl: env.AMQP_URL,
      managementUrl: env.RABBITMQ_MANAGEMENT_URL,
      sqsEndpoint: server?.config.endpoint as string | undefined,
    };
    const namespace = await local.namespace(services, name);
    closers.push(() => namespace.delete());
    const moto = await startMotoServer();
    closers.push(() => moto.stop());
    const pipeline = await LocalPipeline.start(assembly, {
      name,
      services: { ...services, secretsEndpoint: moto.endpoint },
      sqsQueuePrefix: `${name.replace(/_/g, '-')}-`,
      ...(namespace.vhost ? { vhost: namespace.vhost.vhost } : {}),
      countCalls: true,
      ...(options.onLog ? { onLog: options.onLog } : {}),
    });
    closers.push(() => pipeline.close());
    await pipeline.deploy();
    const inventoryDb = new PgDatabase({
      connectionString: inventoryDatabaseUrl({ DATABASE_URL: db.url }),
      max: 4,
    });
    closers.push(() => inventoryDb.close());
    return { db, inventoryDb, vhost: namespace.vhost, pipeline, closers };
  } catch (err) {
    for (const c of closers.reverse()) await c().catch(() => {});
    throw err;
  }
}
