import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { type SqsFaultLayer, startSqsFaultLayer } from '../devkit/emulators/sqsFaults.js';
import { Supervised } from '../devkit/processes.js';
import type { ScratchEnvironment } from '../devkit/scratch.js';
import { TcpProxy } from '../devkit/TcpProxy.js';
import { amqpUrlVia } from '../devkit/transports/rabbitmq.js';
import { DEFAULT_RETENTION, loadBudget } from '../shared/config/budget.js';
import { PIPELINE_TOPOLOGY } from '../shared/pipeline/topology.js';
import type { Diagnosis } from '../shared/port/types.js';
import type { BackendBase } from '../shared/transport/index.js';

const run = promisify(execFile);

/** How the broker goes down: the real broker restarted, or a TCP proxy in front of it cut. */
export type BrokerFault = 'restart' | 'proxy';

/**
 * How the RabbitMQ pipeline consumes: the worker, or the reserve function behind the Amazon MQ
 * trigger emulation (`bin/dev.ts --consumer lambda`).
 */
export type RabbitConsumer = 'worker' | 'amazonmq';

/** The retry budget of the pipeline's processes (and of the controller's view of the queues). */
export const RETRY_ENV = {
  RETRY_LADDER_MS: '1000,2000,3000',
  RETRY_MAX_ATTEMPTS: '3',
  RETRY_MAX_AGE_MS: '600000',
  RETRY_JITTER: '0.1',
};

/** One transport as the soak sees it: how the pipeline reaches it, takes it down, and reads it. */
export interface SoakTransport {
  /** What the pipeline's processes need to reach the broker. */
  childEnv: Record<string, string>;
  /** Extra arguments of the consumer role (`bin/dev.ts`), and how it consumes (for the report). */
  consumerArgs: string[];
  consumerMode: string;
  /** The outage's name in the fault counts (`broker-outage:<label>`). */
  outageLabel: string;
  /** The outage as the report's settings describe it. */
  outageSetting: string;
  /** Takes the broker down for about `downMs`, then brings it back. */
  brokerOutage(downMs: number): Promise<void>;
  /** Messages the consumer still has to take (rejects when the broker does not answer). */
  queueDepth(): Promise<number>;
  /** Everything parked, with how it got there. */
  parked(): Promise<(Diagnosis & { via: 'consumer' | 'broker' })[]>;
  /** Processes of its own (the SQS server), for the exit accounting. */
  processes: Supervised[];
  /**
   * SQS: the fault layer between the pipeline and the server (devkit/emulators/sqsFaults.ts),
   * which the chaos arms now and then: what real queues do that the server does not.
   */
  sqsFaults?: SqsFaultLayer;
  close(): Promise<void>;
}

/** The controller's backend: the pipeline's budget, so it sees the same retry queues. */
const controllerBase = (): BackendBase => ({
  budget: loadBudget(RETRY_ENV),
  retention: DEFAULT_RETENTION,
  topology: PIPELINE_TOPOLOGY,
  consumer: 'soak-controller',
});

const PARKED_LIMIT = 100_000;

/**
 * RabbitMQ on the scratch environment's virtual host. The outage restarts the real broker
 * (`rabbitmqctl stop_app`/`start_app`: every client of the broker sees it) or cuts a TCP proxy
 * the pipeline's processes connect through (the controller always connects directly).
 */
export async function rabbitmqTransport(
  scratch: ScratchEnvironment,
  brokerFault: BrokerFault,
  consumer: RabbitConsumer = 'worker',
): Promise<SoakTransport> {
  const vhost = scratch.vhost;
  if (!vhost) throw new Error('the RabbitMQ soak needs a virtual host');
  const backend = scratch.backend('rabbitmq', controllerBase(), {
    connectionName: 'soak-controller',
  });
  const closers: (() => Promise<void>)[] = [];
  let amqpUrl = vhost.amqpUrl;
  let brokerOutage = outage(
    () => run('rabbitmqctl', ['stop_app'], { timeout: 60_000 }),
    startRabbit,
  );
  if (brokerFault === 'proxy') {
    const target = new URL(scratch.services.amqpUrl);
    const proxy = await new TcpProxy(target.hostname, Number(target.port || 5672)).start();
    closers.push(() => proxy.close());
    amqpUrl = amqpUrlVia(scratch.services.amqpUrl, proxy.port, vhost.vhost);
    brokerOutage = outage(
      () => proxy.cut(),
      () => proxy.restore(),
    );
  }
  return {
    childEnv: {
      AMQP_URL: amqpUrl,
      // the trigger emulation: small batches, so that many invocations run under the faults
      ...(consumer === 'amazonmq' ? { MQ_BATCH_SIZE: '20', MQ_BATCH_WINDOW_MS: '200' } : {}),
    },
    consumerArgs: consumer === 'amazonmq' ? ['--consumer', 'lambda'] : [],
    consumerMode: consumer === 'amazonmq' ? 'Amazon MQ trigger emulation' : 'worker',
    outageLabel: `rabbitmq-${brokerFault}`,
    outageSetting: brokerFault,
    brokerOutage,
    queueDepth: async () => {
      // rejects while the broker does not answer: the drain asks again
      const i = await backend.inspect();
      return i.ready + i.retrying;
    },
    parked: async () =>
      (await backend.parkingLot().list(PARKED_LIMIT)).map((p) => ({ ...p.diagnosis, via: p.via })),
    processes: [],
    // the backend is the scratch environment's: closed with it
    async close() {
      for (const c of closers.reverse()) await c();
    },
  };
}

/**
 * SQS on a fauxqs server of the soak's own, with SQLite persistence, at the scratch environment's
 * SQS endpoint and with its queue prefix. The outage SIGKILLs the server; its supervisor starts it
 * again on the same port and data directory.
 */
export async function sqsTransport(
  scratch: ScratchEnvironment,
  logDir: string,
): Promise<SoakTransport> {
  const endpoint = scratch.services.sqsEndpoint;
  if (!endpoint) throw new Error('the SQS soak needs an SQS endpoint for its server');
  const dataDir = mkdtempSync(join(tmpdir(), 'rm-soak-fauxqs-'));
  const fauxqs = new Supervised(
    {
      role: 'fauxqs',
      args: [
        '--import',
        'tsx',
        'devkit/emulators/fauxqsProcess.ts',
        new URL(endpoint).port,
        dataDir,
      ],
      env: {},
      ready: /fauxqs: listening/,
    },
    { logDir, restartDelayMs: 1_500 },
  );
  // the pipeline's processes reach the server through the fault layer; the controller directly
  const sqsFaults = await startSqsFaultLayer(endpoint);
  const close = async () => {
    await sqsFaults.close();
    await fauxqs.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
  fauxqs.start();
  try {
    await fauxqs.waitReady();
  } catch (err) {
    await close();
    throw err;
  }
  const backend = scratch.backend('sqs', controllerBase(), { maxAttempts: 3 });
  return {
    childEnv: {
      SQS_ENDPOINT: sqsFaults.endpoint,
      SQS_QUEUE_PREFIX: scratch.sqsPrefix,
      // crashed consumers' messages come back after 10 s, not 30
      SQS_VISIBILITY_TIMEOUT_S: '10',
      FUNCTION_TIMEOUT_MS: '1500',
    },
    consumerArgs: [],
    consumerMode: 'SQS trigger emulation',
    outageLabel: 'sqs-server-restart',
    outageSetting: 'restart (fauxqs with SQLite persistence)',
    brokerOutage: async (downMs) => {
      fauxqs.kill({ restartAfterMs: downMs });
      await fauxqs.waitReady(60_000).catch(() => {});
    },
    queueDepth: async () => {
      const i = await backend.inspect();
      return i.ready + i.inFlight + i.retrying;
    },
    parked: async () =>
      (await backend.parkingLot().list(PARKED_LIMIT)).map((p) => ({ ...p.diagnosis, via: p.via })),
    processes: [fauxqs],
    sqsFaults,
    close,
  };
}

/** An outage of about `downMs`: the broker taken `down`, then brought `up` whatever happens. */
const outage = (down: () => unknown, up: () => unknown) => async (downMs: number) => {
  await down();
  try {
    await sleep(downMs);
  } finally {
    await up();
  }
};

async function startRabbit(): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await run('rabbitmqctl', ['start_app'], { timeout: 60_000 });
      await run('rabbitmqctl', ['await_startup'], { timeout: 60_000 });
      return;
    } catch (err) {
      if (attempt >= 5) throw err;
      await sleep(1_000);
    }
  }
}
