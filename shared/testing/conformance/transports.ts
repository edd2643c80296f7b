import { DeleteQueueCommand, ListQueuesCommand } from '@aws-sdk/client-sqs';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type {
  Backend,
  DeliveryJournal,
  MessageHandler,
  RunningConsumer,
} from '../../port/types.js';
import type { BackendBase, TransportName } from '../../transport/index.js';
import { NATS_DEFAULTS } from '../../transport/nats/constants.js';
import { amqpUrlForVhost, RabbitManagement } from '../../transport/rabbitmq/index.js';
import { createSqsClient, SqsBackend } from '../../transport/sqs/index.js';
import { ServiceError } from './database.js';
import { sqsLambdaLoop } from './sqsLoop.js';
import type { ConformanceServices } from './types.js';

/** A scenario's namespace on the broker: the backend's configuration there, and its removal. */
export interface KitNamespace {
  config: Record<string, unknown>;
  delete(): Promise<void>;
}

/** How the kit's consumer runs (a worker's batches are this size at most: a crash leaves work). */
export interface KitConsumerOptions {
  journal?: DeliveryJournal | undefined;
  maxBatch?: number | undefined;
}

/**
 * What the kit needs of a transport beyond its module: whether a second process reaches its
 * broker, the checks before a run, a namespace of its own per scenario, the routes of the
 * subject's event types, and a consumer where the backend has no worker mode (a minimal emulation
 * of its Lambda event source).
 */
export interface KitTransport {
  /** Why a second process cannot consume what this one published, when it cannot. */
  notShared?: string;
  /** The publish deduplication window the kit sets on its namespace, where the broker has one. */
  duplicateWindowMs?: number;
  /** How long a consumer holds a delivery before the broker may give it to another. */
  lease?: KitLease;
  preflight?(services: ConformanceServices): Promise<void>;
  namespace(services: ConformanceServices, name: string, base: BackendBase): Promise<KitNamespace>;
  lambda?(
    backend: Backend,
    handler: MessageHandler,
    options: KitConsumerOptions,
  ): Promise<RunningConsumer>;
}

/**
 * A consumer's lease on what it was delivered, as the kit sets it short: `delivery`, a lease on
 * each delivery (SQS's visibility timeout, JetStream's ack wait: a slow handler outlives it);
 * `connection`, as long as the consumer's connection lives (RabbitMQ: a frozen process misses its
 * heartbeats and loses it; a slow one keeps it).
 */
export interface KitLease {
  on: 'delivery' | 'connection';
  ms: number;
  /** What it is, for the report. */
  text: string;
  /** Settings of a consumer process's backend that make it this short. */
  childConfig?: Record<string, unknown>;
}

/** How long a broker may leave a crashed consumer's deliveries before it delivers them again. */
const REDELIVER_AFTER_S = 3;

/** The heartbeat a RabbitMQ consumer process is given (s): the broker closes it after two missed. */
const KIT_HEARTBEAT_S = 1;

const required = (value: string | undefined, variable: string): string => {
  if (!value) throw new ServiceError(`${variable} is not set`);
  return value;
};

const hostOf = (url: string) => new URL(url).host;

const memory: KitTransport = {
  notShared:
    'the in-memory broker lives inside one process: a second process cannot take over its messages',
  namespace: async (_services, _name, base) => ({ config: { ...base }, delete: async () => {} }),
};

const rabbitmq: KitTransport = {
  lease: {
    on: 'connection',
    ms: 2 * KIT_HEARTBEAT_S * 1_000,
    text: `its connection's heartbeat timeout (${KIT_HEARTBEAT_S} s; the broker closes it after two missed)`,
    childConfig: { heartbeatSeconds: KIT_HEARTBEAT_S },
  },
  async preflight(services) {
    required(services.amqpUrl, 'AMQP_URL');
    const url = required(services.managementUrl, 'RABBITMQ_MANAGEMENT_URL');
    try {
      await new RabbitManagement(url).version();
    } catch (err) {
      throw new ServiceError(
        `RabbitMQ's management API at ${hostOf(url)} does not answer (${(err as Error).message}): the kit creates a virtual host per scenario through it. Enable it with \`rabbitmq-plugins enable rabbitmq_management\` (then RABBITMQ_MANAGEMENT_URL, default http://guest:guest@127.0.0.1:15672)`,
        { cause: err },
      );
    }
  },
  async namespace(services, name, base) {
    const management = new RabbitManagement(
      required(services.managementUrl, 'RABBITMQ_MANAGEMENT_URL'),
    );
    await management.createVhost(name);
    return {
      config: {
        url: amqpUrlForVhost(required(services.amqpUrl, 'AMQP_URL'), name),
        managementUrl: services.managementUrl,
        vhost: name,
        connectionName: name,
        reconnect: { baseMs: 100, maxMs: 1_000 },
        ...base,
      },
      delete: () => management.deleteVhost(name),
    };
  },
};

const sqs: KitTransport = {
  lease: {
    on: 'delivery',
    ms: REDELIVER_AFTER_S * 1_000,
    text: `the visibility timeout (${REDELIVER_AFTER_S} s)`,
  },
  async preflight(services) {
    const client = createSqsClient({
      endpoint: services.sqsEndpoint,
      region: services.region,
      maxAttempts: 1,
    });
    try {
      await client.send(new ListQueuesCommand({ MaxResults: 1 }));
    } catch (err) {
      throw new ServiceError(
        `SQS at ${services.sqsEndpoint ? hostOf(services.sqsEndpoint) : 'AWS'} does not answer (${(err as Error).message}): set SQS_ENDPOINT to an SQS-compatible server`,
        { cause: err },
      );
    } finally {
      client.destroy();
    }
  },
  async namespace(services, name, base) {
    const prefix = `${name.replace(/_/g, '-')}-`;
    return {
      config: {
        ...(services.sqsEndpoint ? { endpoint: services.sqsEndpoint } : {}),
        region: services.region ?? 'us-east-1',
        prefix,
        mode: 'visibility',
        visibilityTimeoutSeconds: REDELIVER_AFTER_S,
        ...base,
      },
      async delete() {
        const client = createSqsClient({ endpoint: services.sqsEndpoint, region: services.region });
        try {
          const { QueueUrls = [] } = await client.send(
            new ListQueuesCommand({ QueueNamePrefix: prefix }),
          );
          for (const url of QueueUrls) await client.send(new DeleteQueueCommand({ QueueUrl: url }));
        } finally {
          client.destroy();
        }
      },
    };
  },
  lambda(backend, handler, options) {
    if (!(backend instanceof SqsBackend)) throw new Error('not an SQS backend');
    return sqsLambdaLoop(backend, handler, {
      journal: options.journal,
      batchSize: options.maxBatch,
    });
  },
};

const natsServers = (services: ConformanceServices) =>
  (services.natsUrl ?? NATS_DEFAULTS.servers).split(',').map((s) => s.trim());

/** JetStream's shortest duplicate window. */
const NATS_DUPLICATE_WINDOW_MS = 100;

const nats: KitTransport = {
  duplicateWindowMs: NATS_DUPLICATE_WINDOW_MS,
  lease: {
    on: 'delivery',
    ms: REDELIVER_AFTER_S * 1_000,
    text: `the ack wait (${REDELIVER_AFTER_S} s)`,
  },
  async preflight(services) {
    try {
      const nc = await connect({ servers: natsServers(services), timeout: 3_000 });
      await nc.close();
    } catch (err) {
      throw new ServiceError(
        `NATS at ${natsServers(services).join(',')} does not answer (${(err as Error).message}): set NATS_URL to a server with JetStream`,
        { cause: err },
      );
    }
  },
  async namespace(services, name, base) {
    const prefix = `${name}_`;
    const servers = natsServers(services);
    return {
      config: {
        servers,
        prefix,
        // a crashed worker's deliveries come back after this (the default, 30 s, is for production)
        ackWaitMs: REDELIVER_AFTER_S * 1_000,
        // a copy published past it reaches the handler (the default, 2 min, would drop it)
        duplicateWindowMs: NATS_DUPLICATE_WINDOW_MS,
        ...base,
      },
      async delete() {
        const nc = await connect({ servers, timeout: 3_000 });
        try {
          const jsm = await jetstreamManager(nc);
          for await (const stream of jsm.streams.names()) {
            if (stream.startsWith(prefix)) await jsm.streams.delete(stream);
          }
        } finally {
          await nc.close();
        }
      },
    };
  },
};

/** The kit's side of every registered transport. */
export const KIT_TRANSPORTS: Record<TransportName, KitTransport> = {
  memory,
  rabbitmq,
  sqs,
  'nats-jetstream': nats,
};

/**
 * The subject's consumer on `backend`: its worker where the backend has one, else the kit's
 * emulation of its Lambda event source.
 */
export async function startConsumer(
  backend: Backend,
  kit: KitTransport,
  handler: MessageHandler,
  options: KitConsumerOptions,
): Promise<RunningConsumer> {
  if (backend.capabilities.consumeModes.includes('worker')) {
    return backend.consume(handler, {
      journal: options.journal,
      ...(options.maxBatch ? { prefetch: options.maxBatch, maxBatch: options.maxBatch } : {}),
    });
  }
  if (!kit.lambda) {
    throw new Error(`the kit cannot run a consumer of ${backend.transport}: no worker mode`);
  }
  return kit.lambda(backend, handler, options);
}
