import { spawn, spawnSync } from 'node:child_process';
import type { TestProject } from 'vitest/node';
import { containerEngine, firstLine, onLoopback } from '../devkit/containers.js';
import { startLoopbackFauxqs } from '../devkit/emulators/sqsServer.js';
import { freePort } from '../devkit/freePort.js';
import { ensureServices } from '../devkit/preflight.js';
import { REDIS_URL, redisProblem } from '../peers/redis.js';

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
 * Makes sure PostgreSQL and RabbitMQ (with its management API) answer before any test runs: a
 * local broker's management plugin that is off is turned on; a service that does not answer is
 * started in a container where an engine can (`ensureServices`, devkit/preflight.ts); with
 * neither, the run stops with one line per service saying what to start.
 */
export async function setup(project: TestProject): Promise<void> {
  const ensured = await ensureServices({
    databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    amqpUrl: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
    managementUrl: process.env.RABBITMQ_MANAGEMENT_URL ?? 'http://guest:guest@127.0.0.1:15672',
  });
  stops.push(ensured.stop);
  if (ensured.problems.length > 0) {
    await ensured.stop();
    throw new Error(ensured.problems.join('\n'));
  }
  const redis = await ensureRedis();
  if (redis) {
    await ensured.stop();
    throw new Error(redis);
  }
  const services: TestServices = {
    databaseUrl: ensured.databaseUrl,
    amqpUrl: ensured.amqpUrl,
    managementUrl: ensured.managementUrl,
    sqs: await startSqsServers(),
  };
  process.env.DATABASE_URL = services.databaseUrl;
  process.env.AMQP_URL = services.amqpUrl;
  process.env.RABBITMQ_MANAGEMENT_URL = services.managementUrl;
  project.provide('services', services);
}

/**
 * Redis for the peers' stores (test/integration/peers.*, lab.peers): started here, as Debian's
 * `redis-server` without persistence, when it does not answer and the binary is on PATH.
 * Returns what is wrong, if anything.
 */
async function ensureRedis(): Promise<string | undefined> {
  const problem = await redisProblem(REDIS_URL);
  if (!problem) return undefined;
  const url = new URL(REDIS_URL);
  if (!['127.0.0.1', 'localhost'].includes(url.hostname)) return problem;
  const started = spawnSync(
    'redis-server',
    [
      '--bind',
      '127.0.0.1',
      '--port',
      url.port || '6379',
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'yes',
    ],
    { encoding: 'utf8' },
  );
  if (started.error || started.status !== 0) {
    return `${problem} (not started here: ${started.error?.message ?? firstLine(started.stderr)})`;
  }
  for (let i = 0; i < 50; i++) {
    if (!(await redisProblem(REDIS_URL))) return undefined;
    await new Promise((r) => setTimeout(r, 100));
  }
  return `${problem} (redis-server started but does not answer)`;
}

/**
 * The SQS servers live in the test runner's process (fauxqs) or their own (moto), never in a test
 * file's: a test that kills a consumer must not take the queues down with it. `SQS_ENDPOINT`
 * replaces both with one external server.
 */
async function startSqsServers(): Promise<SqsServer[]> {
  if (process.env.SQS_ENDPOINT) return [{ name: 'external', endpoint: process.env.SQS_ENDPOINT }];
  const fauxqs = await startLoopbackFauxqs({ port: 0, logger: false });
  stops.push(() => fauxqs.stop());
  const servers: SqsServer[] = [{ name: 'fauxqs', endpoint: `http://127.0.0.1:${fauxqs.port}` }];
  const moto = await startMoto();
  if (moto) servers.push(moto);
  const localstack = await startLocalStack();
  if (localstack) servers.push(localstack);
  return servers;
}

/**
 * LocalStack through testcontainers, when an engine answers and has (or can pull) its image;
 * otherwise one line why not. It adds a third SQS implementation to the SQS tests (the one many
 * teams test against); fauxqs and moto run them without it.
 */
async function startLocalStack(): Promise<SqsServer | undefined> {
  const skip = (why: string) => {
    process.stdout.write(`LocalStack SQS path skipped: ${why}\n`);
    return undefined;
  };
  const engine = await containerEngine();
  if ('reason' in engine) return skip(engine.reason);
  const choice = await engine.choose('localstack');
  if ('reason' in choice) return skip(choice.reason);
  try {
    const { LocalstackContainer } = await import('@testcontainers/localstack');
    const c = await onLoopback(new LocalstackContainer(choice.image)).start();
    stops.push(() => c.stop());
    return { name: 'localstack', endpoint: c.getConnectionUri() };
  } catch (err) {
    return skip(`${choice.image} did not start (${firstLine(err)})`);
  }
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
