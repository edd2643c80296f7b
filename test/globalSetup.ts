import { spawn, spawnSync } from 'node:child_process';
import type { TestProject } from 'vitest/node';
import { freePort } from '../devkit/freePort.js';
import {
  checkPostgres,
  checkRabbitManagement,
  checkRabbitMq,
  describeProblem,
  type ServiceProblem,
} from '../devkit/preflight.js';

export interface SqsServer {
  /** `fauxqs` (embedded, always) or `moto` (when moto_server is on PATH). */
  name: 'fauxqs' | 'moto' | 'localstack' | 'external';
  endpoint: string;
}

export interface TestServices {
  databaseUrl: string;
  amqpUrl: string;
  managementUrl: string;
  /** SQS-compatible servers the SQS tests run against, each hosted outside the test files. */
  sqs: SqsServer[];
}

declare module 'vitest' {
  export interface ProvidedContext {
    services: TestServices;
  }
}

const stops: (() => Promise<unknown>)[] = [];

/**
 * Makes sure PostgreSQL and RabbitMQ (with its management API) answer before any test runs.
 * Where one does not but a Docker engine does, it is started with testcontainers; with neither,
 * the run stops with one line saying what to start.
 */
export async function setup(project: TestProject): Promise<void> {
  const services: TestServices = {
    databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    amqpUrl: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
    managementUrl: process.env.RABBITMQ_MANAGEMENT_URL ?? 'http://guest:guest@127.0.0.1:15672',
    sqs: await startSqsServers(),
  };
  const pgProblem = await checkPostgres(services.databaseUrl);
  let rabbitProblem: ServiceProblem | undefined = await checkRabbitMq(services.amqpUrl);
  const managementProblem = rabbitProblem
    ? undefined
    : await checkRabbitManagement(services.managementUrl);
  if (managementProblem) throw new Error(describeProblem(managementProblem));

  if (pgProblem || rabbitProblem) {
    const missing = [pgProblem, rabbitProblem].filter(Boolean) as ServiceProblem[];
    let dockerError: string | undefined;
    try {
      if (pgProblem) {
        const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
        const c = await new PostgreSqlContainer('postgres:15-alpine')
          .withUsername('postgres')
          .withPassword('postgres')
          .withDatabase('test')
          .start();
        stops.push(() => c.stop());
        services.databaseUrl = c.getConnectionUri();
      }
      if (rabbitProblem) {
        const { RabbitMQContainer } = await import('@testcontainers/rabbitmq');
        const c = await new RabbitMQContainer('rabbitmq:3.13-management').start();
        stops.push(() => c.stop());
        services.amqpUrl = c.getAmqpUrl();
        services.managementUrl = `http://guest:guest@${c.getHost()}:${c.getMappedPort(15672)}`;
        rabbitProblem = undefined;
      }
    } catch (err) {
      dockerError = (err as Error).message.split('\n')[0];
    }
    if (dockerError) {
      throw new Error(
        `${missing.map(describeProblem).join('; ')}; and no Docker engine for testcontainers (${dockerError})`,
      );
    }
    process.stdout.write(
      `started with testcontainers: ${missing.map((m) => m.service).join(', ')}\n`,
    );
  }
  process.env.DATABASE_URL = services.databaseUrl;
  process.env.AMQP_URL = services.amqpUrl;
  process.env.RABBITMQ_MANAGEMENT_URL = services.managementUrl;
  project.provide('services', services);
}

/**
 * The SQS servers live in the test runner's process (fauxqs) or their own (moto), never in a test
 * file's: a test that kills a consumer must not take the queues down with it. `SQS_ENDPOINT`
 * replaces both with one external server.
 */
async function startSqsServers(): Promise<SqsServer[]> {
  if (process.env.SQS_ENDPOINT) return [{ name: 'external', endpoint: process.env.SQS_ENDPOINT }];
  const { startFauxqs } = await import('fauxqs');
  const fauxqs = await startFauxqs({ port: 0, logger: false });
  stops.push(() => fauxqs.stop());
  const servers: SqsServer[] = [{ name: 'fauxqs', endpoint: `http://127.0.0.1:${fauxqs.port}` }];
  const moto = await startMoto();
  if (moto) servers.push(moto);
  const localstack = await startLocalStack();
  if (localstack) servers.push(localstack);
  return servers;
}

/** LocalStack through testcontainers, when a Docker engine answers; otherwise one line why not. */
async function startLocalStack(): Promise<SqsServer | undefined> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
  } catch (err) {
    process.stdout.write(
      `no Docker engine (${(err as Error).message.split('\n')[0]}): the LocalStack SQS path is skipped\n`,
    );
    return undefined;
  }
  const { LocalstackContainer } = await import('@testcontainers/localstack');
  const c = await new LocalstackContainer('localstack/localstack:4').start();
  stops.push(() => c.stop());
  return { name: 'localstack', endpoint: c.getConnectionUri() };
}

async function startMoto(): Promise<SqsServer | undefined> {
  const found = spawnSync('sh', ['-c', 'command -v moto_server'], { encoding: 'utf8' });
  if (found.status !== 0) {
    process.stdout.write(
      'moto_server is not on PATH: the SQS tests run on the embedded fauxqs server only\n',
    );
    return undefined;
  }
  const port = await freePort();
  const child = spawn('moto_server', ['-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
  stops.push(async () => {
    child.kill('SIGTERM');
  });
  // moto's SDK clients must use `localhost` (its S3 misreads 127.0.0.1; harmless for SQS, kept uniform)
  const endpoint = `http://localhost:${port}`;
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${endpoint}/moto-api/`, { signal: AbortSignal.timeout(500) });
      if (res.status < 500) return { name: 'moto', endpoint };
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  process.stdout.write('moto_server did not start within 20 s: the SQS tests run on fauxqs only\n');
  child.kill('SIGKILL');
  return undefined;
}

export async function teardown(): Promise<void> {
  await Promise.all(stops.map((stop) => stop()));
}
