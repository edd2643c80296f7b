import { freePort } from '../devkit/freePort.js';
import type { NodeProcess } from '../devkit/processes.js';
import type { ScratchEnvironment } from '../devkit/scratch.js';
import { createSqsClient } from '../shared/transport/sqs/index.js';
import type { DeployedTransport } from './deployed.js';
import { FAUXQS_SERVER, startRole } from './processes.js';
import { type RawLatency, rawRabbitLatency, rawSqsLatency } from './rawLatency.js';

/**
 * The processes of an end-to-end run: an SQS server of its own (SQS only) and the pipeline's
 * roles, each a process of its own (`npm run dev` roles, bundled). Every process started is added
 * to `started`, which the run stops, last first, whatever happens.
 */

/**
 * Each transport's broker in an end-to-end run (RabbitMQ: the run's virtual host; SQS: a server
 * of the run's own): the roles' variables beyond the pipeline's, and the bare broker's latency.
 */
export const E2E_BROKERS: Record<
  DeployedTransport,
  (c: { scratch: ScratchEnvironment; region: string; started: NodeProcess[] }) => Promise<{
    env: NodeJS.ProcessEnv;
    rawLatency(rate: number, seconds: number): Promise<RawLatency>;
  }>
> = {
  rabbitmq: async ({ scratch }) => ({
    env: {},
    rawLatency: (rate, seconds) =>
      rawRabbitLatency(scratch.vhost?.amqpUrl as string, rate, seconds),
  }),
  // fauxqs in a process of its own, so that its CPU is not the bench's
  sqs: async ({ scratch, region, started }) => {
    const port = await freePort();
    const args = ['--input-type=module', '-e', FAUXQS_SERVER];
    started.push(await startRole('fauxqs', args, { PORT: String(port) }, 'listening'));
    const endpoint = `http://127.0.0.1:${port}`;
    return {
      env: { SQS_ENDPOINT: endpoint, SQS_QUEUE_PREFIX: scratch.sqsPrefix },
      rawLatency: (rate, seconds) => {
        const client = createSqsClient({ endpoint, region, requestTimeoutMs: 25_000 });
        return rawSqsLatency(client, `${scratch.sqsPrefix}raw`, rate, seconds).finally(() =>
          client.destroy(),
        );
      },
    };
  },
};

export interface Pipeline {
  api: NodeProcess;
  relay: NodeProcess;
  consumer: NodeProcess;
  /** Where orders are placed. */
  apiUrl: string;
}

/** A role's environment: the pipeline's, with its NODE_OPTIONS (and a CPU profile if asked). */
export function roleEnvironment(
  childEnv: NodeJS.ProcessEnv,
  transport: string,
  o: { nodeOptions?: string | undefined; profileDir?: string | undefined },
): (role: string) => NodeJS.ProcessEnv {
  return (role) => ({
    ...childEnv,
    NODE_OPTIONS: [
      o.nodeOptions ?? '',
      o.profileDir ? `--cpu-prof --cpu-prof-dir=${o.profileDir}/${transport}/${role}` : '',
    ]
      .join(' ')
      .trim(),
  });
}

/** The API, the relay and the consumer, started one after the other, each awaited ready. */
export async function startPipeline(c: {
  bundle: string;
  transport: string;
  roleEnv: (role: string) => NodeJS.ProcessEnv;
  started: NodeProcess[];
}): Promise<Pipeline> {
  const apiPort = await freePort();
  const dev = (role: string) => [c.bundle, '--transport', c.transport, '--role', role];
  const api = await startRole(
    'api',
    [...dev('api'), '--port', String(apiPort)],
    c.roleEnv('api'),
    'api:',
  );
  c.started.push(api);
  const relay = await startRole(
    'relay',
    [...dev('relay'), '--relay-loop'],
    c.roleEnv('relay'),
    'relay:',
  );
  c.started.push(relay);
  const consumer = await startRole('consumer', dev('consumer'), c.roleEnv('consumer'), 'consumer:');
  c.started.push(consumer);
  return { api, relay, consumer, apiUrl: `http://127.0.0.1:${apiPort}/orders` };
}
