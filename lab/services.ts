import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { startLoopbackFauxqs } from '../devkit/emulators/sqsServer.js';
import { withDatabase } from '../devkit/scratch.js';
import { NATS_URL } from '../devkit/transports/nats.js';
import type { Env } from '../shared/config/env.js';
import { RabbitManagement } from '../shared/transport/rabbitmq/index.js';
import type { LabServices } from './settings.js';

export interface RunningLabServices extends LabServices {
  sqsName: string;
  versions: Record<string, string>;
  stop: () => Promise<void>;
}

async function fauxqsVersion(): Promise<string> {
  try {
    // the package's exports hide package.json: walk up from its entry point
    let dir = dirname(fileURLToPath(import.meta.resolve('fauxqs')));
    for (let i = 0; i < 5; i++, dir = dirname(dir)) {
      const pkg = JSON.parse(
        await readFile(join(dir, 'package.json'), 'utf8').catch(() => '{}'),
      ) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'fauxqs' && pkg.version) return pkg.version;
    }
  } catch {
    // unknown
  }
  return 'unknown';
}

/**
 * The services a lab run uses: PostgreSQL and RabbitMQ from the environment, and SQS at
 * `SQS_ENDPOINT` or, unset, an embedded fauxqs server of this process on a free port.
 */
export async function startLabServices(env: Env): Promise<RunningLabServices> {
  let sqsEndpoint = env.SQS_ENDPOINT;
  let sqsName = 'SQS_ENDPOINT';
  let stop = async () => {};
  const versions: Record<string, string> = { node: process.version };
  if (!sqsEndpoint) {
    const server = await startLoopbackFauxqs({ port: 0, logger: false });
    sqsEndpoint = `http://127.0.0.1:${server.port}`;
    versions.fauxqs = await fauxqsVersion();
    sqsName = `fauxqs ${versions.fauxqs} (embedded)`;
    stop = () => server.stop();
  }
  versions.rabbitmq = await new RabbitManagement(env.RABBITMQ_MANAGEMENT_URL)
    .version()
    .catch(() => 'unknown');
  versions.nats = await natsVersion(NATS_URL).catch(() => 'unknown');
  const client = new pg.Client({ connectionString: withDatabase(env.DATABASE_URL, 'postgres') });
  await client.connect();
  try {
    const { rows } = await client.query<{ server_version: string }>('SHOW server_version');
    versions.postgresql = rows[0]?.server_version ?? 'unknown';
  } finally {
    await client.end();
  }
  return {
    databaseUrl: env.DATABASE_URL,
    amqpUrl: env.AMQP_URL,
    managementUrl: env.RABBITMQ_MANAGEMENT_URL,
    sqsEndpoint,
    sqsName,
    versions,
    stop,
  };
}

/** The NATS server's version, from its INFO. */
async function natsVersion(servers: string): Promise<string> {
  const nc = await connect({ servers: servers.split(','), timeout: 2_000 });
  try {
    return nc.info?.version ?? 'unknown';
  } finally {
    await nc.close();
  }
}
