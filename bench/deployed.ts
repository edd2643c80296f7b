import { startMotoServer } from '../devkit/emulators/motoServer.js';
import { ensureLocalSqs } from '../devkit/emulators/sqsServer.js';
import type { DeployedAssembly } from '../devkit/lambda/assembly.js';
import { LocalPipeline } from '../devkit/lambda/localPipeline.js';
import { createScratchDatabase, type ScratchDatabase } from '../devkit/scratch.js';
import { createScratchVhost } from '../devkit/transports/rabbitmq.js';
import type { ScratchVhost } from '../devkit/transports/types.js';
import type { Env } from '../shared/config/env.js';

export interface DeployedForBench {
  db: ScratchDatabase;
  vhost: ScratchVhost | undefined;
  pipeline: LocalPipeline;
  /** Undoes everything, last first (the caller adds its own and runs them in reverse). */
  closers: (() => Promise<unknown>)[];
}

/**
 * A synthesized stack stood up locally for a benchmark, every AWS call counted: a scratch
 * database the stack's own migrate custom resource fills, a virtual host (RabbitMQ) or a local
 * SQS server, moto for Secrets Manager and SSM, the pipeline deployed (bench/relayDeployed.ts,
 * bench/cost.ts). On failure what was created is removed again.
 */
export async function deployForBench(
  env: Env,
  transport: 'sqs' | 'rabbitmq',
  assembly: DeployedAssembly,
  name: string,
  options: { onLog?: (functionName: string, line: string) => void } = {},
): Promise<DeployedForBench> {
  const db = await createScratchDatabase(env.DATABASE_URL, name, { migrated: false });
  const closers: (() => Promise<unknown>)[] = [() => db.drop()];
  try {
    const vhost =
      transport === 'rabbitmq'
        ? await createScratchVhost(env.RABBITMQ_MANAGEMENT_URL, env.AMQP_URL, name)
        : undefined;
    if (vhost) closers.push(() => vhost.delete());
    const sqs =
      transport === 'sqs'
        ? await ensureLocalSqs({ endpoint: env.SQS_ENDPOINT, port: 0 })
        : undefined;
    if (sqs) closers.push(() => sqs.stop());
    const moto = await startMotoServer();
    closers.push(() => moto.stop());
    const pipeline = await LocalPipeline.start(assembly, {
      name,
      services: {
        databaseUrl: db.url,
        amqpUrl: env.AMQP_URL,
        managementUrl: env.RABBITMQ_MANAGEMENT_URL,
        sqsEndpoint: sqs?.endpoint,
        secretsEndpoint: moto.endpoint,
      },
      sqsQueuePrefix: `${name.replace(/_/g, '-')}-`,
      ...(vhost ? { vhost: vhost.vhost } : {}),
      countCalls: true,
      ...(options.onLog ? { onLog: options.onLog } : {}),
    });
    closers.push(() => pipeline.close());
    await pipeline.deploy();
    return { db, vhost, pipeline, closers };
  } catch (err) {
    for (const c of closers.reverse()) await c().catch(() => {});
    throw err;
  }
}
