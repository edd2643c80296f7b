import type { ConfirmChannel } from 'amqplib';
import { type Retention, type RetryBudget, rabbitRetryDelays } from '../../config/budget.js';
import { ConfigError, type Env } from '../../config/env.js';
import { ConsumerDriver } from '../../consumer/driver.js';
import type { Journal } from '../../consumer/journal.js';
import type { Logger } from '../../logger.js';
import type {
  Backend,
  Capabilities,
  Inspection,
  MessageHandler,
  ParkingLot,
  PrepareReport,
  Publisher,
  RunningConsumer,
  Stream,
} from '../types.js';
import { type AmazonMqDelivery, AmazonMqSettle } from './AmazonMqSettle.js';
import { type BrokerCredentials, withCredentials } from './brokerSecret.js';
import { ConfirmedChannel } from './ConfirmedChannel.js';
import {
  OUTBOX_EXCHANGE,
  RABBITMQ_DEFAULTS,
  RABBITMQ_NAMES,
  RETRY_NAMES,
  retryQueueName,
} from './constants.js';
import { RabbitCopies } from './copies.js';
import { rabbitParkingLot } from './parking.js';
import { RabbitConnection } from './RabbitConnection.js';
import { RabbitManagement } from './RabbitManagement.js';
import { RabbitPublisher } from './RabbitPublisher.js';
import { RabbitWorker } from './RabbitWorker.js';
import {
  applyPolicies,
  buildPolicies,
  buildTopology,
  CORE_TOPOLOGY,
  declareTopology,
  prepareInventoryTopology,
  vhostOf,
} from './topology.js';

export {
  type AmazonMqDelivery,
  amazonMqDeliveries,
  BatchNotSettledError,
} from './AmazonMqSettle.js';
export type { RabbitMQEvent, RmqMessage } from './amazonMqEvent.js';
export { rmqQueueKey, toRmqMessage } from './amazonMqEvent.js';
export { type BrokerCredentials, parseBrokerSecret, readBrokerSecret } from './brokerSecret.js';
export {
  AMAZON_MQ_TRIGGER,
  HEADERS,
  OUTBOX_EXCHANGE,
  RABBITMQ_DEFAULTS,
  RABBITMQ_NAMES,
  RETRY_NAMES,
  retryQueueName,
  SCHEMA_VERSION_HEADER,
} from './constants.js';
export { publishQueueMetrics, QUEUE_METRICS } from './queueMetrics.js';
export { amqpUrlForVhost, RabbitManagement } from './RabbitManagement.js';
export { declaredTopology, type Policy, vhostOf } from './topology.js';

/** Where the broker is and how this backend uses it. */
export interface RabbitMqBackendConfig {
  /**
   * The AMQP URL (with its virtual host), or a function that resolves it on first connect
   * (deployed functions read the Amazon MQ credentials from Secrets Manager then).
   */
  url: string | (() => Promise<string>);
  /** The management API URL with credentials, or a resolver; needed by `prepare` and `inspect`. */
  managementUrl?: string | (() => Promise<string>);
  /** The virtual host the URL names (policies are applied there). */
  vhost: string;
  budget: RetryBudget;
  retention: Retention;
  /** Who parks, for diagnoses (`inventory@<version>`). */
  consumer: string;
  /** Quorum-queue delivery limit of `inventory.orders` (the broker's own backstop). */
  deliveryLimit?: number;
  connectionName?: string;
  publish?: { window?: number; confirmTimeoutMs?: number; connectTimeoutMs?: number };
  reconnect?: { baseMs?: number; maxMs?: number };
  logger?: Logger;
}

export interface WorkerOptions {
  journal?: Journal | undefined;
  /** Worker channels in this process (each with its own transaction). */
  concurrency?: number;
  prefetch?: number;
  maxBatch?: number;
  /** Channel reconnect backoff after a give-back (defaults: the backend's reconnect settings). */
  reconnectBaseMs?: number;
  reconnectMaxMs?: number;
}

const CAPABILITIES: Capabilities = {
  orderedPerKey: true,
  perMessageDelay: false,
  partialBatchResponse: true,
  redeliveryFlag: true,
};

/**
 * The RabbitMQ backend (Amazon MQ in AWS), composed from configuration: one connection, the
 * topology and its policies, publishers, the worker and the Amazon MQ trigger's consumer side,
 * the parking lot and `inspect()`. Nothing connects until first use.
 */
export class RabbitMqBackend implements Backend {
  readonly transport = 'rabbitmq';
  readonly capabilities = CAPABILITIES;
  readonly connection: RabbitConnection;
  private readonly publishChannel: ConfirmedChannel;
  private readonly copiesChannel: ConfirmedChannel;
  private readonly copies: RabbitCopies;
  private readonly publishers = new Map<string, Publisher>();
  private readonly consumers: RunningConsumer[] = [];
  private managementClient: Promise<RabbitManagement> | undefined;

  constructor(readonly config: RabbitMqBackendConfig) {
    this.connection = new RabbitConnection(
      {
        url: config.url,
        connectionName: config.connectionName ?? 'reliable-messaging',
        initialReconnectDelayMs: config.reconnect?.baseMs ?? RABBITMQ_DEFAULTS.reconnectBaseMs,
        maxReconnectDelayMs: config.reconnect?.maxMs ?? RABBITMQ_DEFAULTS.reconnectMaxMs,
      },
      config.logger,
    );
    const connectTimeoutMs = config.publish?.connectTimeoutMs;
    this.publishChannel = new ConfirmedChannel(this.connection, { connectTimeoutMs });
    this.copiesChannel = new ConfirmedChannel(this.connection, { connectTimeoutMs });
    this.copies = new RabbitCopies(this.copiesChannel, {
      budget: config.budget,
      confirmTimeoutMs: config.publish?.confirmTimeoutMs,
    });
  }

  /** The management API client (Amazon MQ's console endpoint when deployed). */
  management(): Promise<RabbitManagement> {
    const source = this.config.managementUrl;
    if (!source) return Promise.reject(new Error('the RabbitMQ backend has no management URL'));
    this.managementClient ??= (async () =>
      new RabbitManagement(typeof source === 'string' ? source : await source()))().catch(
      (err: unknown) => {
        this.managementClient = undefined;
        throw err;
      },
    );
    return this.managementClient;
  }

  /**
   * `publish`: the exchanges and queues of the order and inventory event flows (the relay);
   * `consume`: also the retry buckets and the parking lot, and every policy (management API).
   */
  async prepare(scope: 'publish' | 'consume' = 'consume'): Promise<PrepareReport> {
    if (scope === 'publish') {
      await this.withChannel((ch) => declareTopology(ch, CORE_TOPOLOGY), 10_000);
      return { queues: CORE_TOPOLOGY.queues.length, policies: 0 };
    }
    const management = await this.management();
    await prepareInventoryTopology({
      channel: (fn) => this.withChannel(fn, 30_000),
      management,
      vhost: this.config.vhost,
      budget: this.config.budget,
      retention: this.config.retention,
      policy: { deliveryLimit: this.config.deliveryLimit ?? RABBITMQ_DEFAULTS.deliveryLimit },
    });
    return {
      queues: buildTopology(this.config.budget).queues.length,
      policies: buildPolicies(this.config.budget, this.config.retention).length,
      server: `RabbitMQ ${await management.version()}`,
    };
  }

  /** Re-applies the policies, e.g. with another delivery limit (lab controls). */
  async applyPolicies(options: { deliveryLimit?: number; only?: string[] } = {}): Promise<void> {
    const policies = buildPolicies(this.config.budget, this.config.retention, {
      deliveryLimit: options.deliveryLimit ?? this.config.deliveryLimit,
    }).filter((p) => !options.only || options.only.includes(p.name));
    await applyPolicies(await this.management(), this.config.vhost, policies);
  }

  async ready(timeoutMs = 5_000): Promise<void> {
    await this.publishChannel.ready(timeoutMs);
  }

  /** The publisher of a stream (an outbox table's exchange), or of any exchange by name. */
  publisher(stream: Stream = 'outbox', options: { exchange?: string } = {}): Publisher {
    const exchange = options.exchange ?? OUTBOX_EXCHANGE[stream as keyof typeof OUTBOX_EXCHANGE];
    if (!exchange) throw new Error(`no RabbitMQ exchange for stream "${stream}"`);
    let p = this.publishers.get(exchange);
    if (!p) {
      p = new RabbitPublisher(
        { channel: this.publishChannel },
        {
          exchange,
          window: this.config.publish?.window,
          confirmTimeoutMs: this.config.publish?.confirmTimeoutMs,
          connectTimeoutMs: this.config.publish?.connectTimeoutMs,
        },
      );
      this.publishers.set(exchange, p);
    }
    return p;
  }

  /** Worker-mode consumers of `inventory.orders` in this process, started. */
  async startWorker(
    handler: MessageHandler,
    options: WorkerOptions = {},
  ): Promise<RunningConsumer> {
    const workers = Array.from(
      { length: options.concurrency ?? 1 },
      () =>
        new RabbitWorker(
          {
            connection: this.connection,
            copies: this.copies,
            resetCopies: () => this.copiesChannel.reset(),
            handler,
            journal: options.journal,
            logger: this.config.logger,
          },
          {
            queue: RABBITMQ_NAMES.inventoryQueue,
            consumer: this.config.consumer,
            prefetch: options.prefetch,
            maxBatch: options.maxBatch,
            reconnectBaseMs: options.reconnectBaseMs ?? this.config.reconnect?.baseMs,
            reconnectMaxMs: options.reconnectMaxMs ?? this.config.reconnect?.maxMs,
          },
        ),
    );
    for (const w of workers) await w.start();
    const running: RunningConsumer & { reconnects: number } = {
      get stats() {
        return {
          batches: workers.reduce((n, w) => n + w.stats.batches, 0),
          messages: workers.reduce((n, w) => n + w.stats.messages, 0),
          givenBack: workers.reduce((n, w) => n + w.stats.givenBack, 0),
        };
      },
      get reconnects() {
        return workers.reduce((n, w) => n + w.reconnects, 0);
      },
      stop: async () => {
        await Promise.all(workers.map((w) => w.stop()));
      },
    };
    this.consumers.push(running);
    return running;
  }

  /** The consumer driver behind the Amazon MQ trigger (the reserve function's handler). */
  amazonMqDriver(
    handler: MessageHandler,
    options: { journal?: Journal | undefined } = {},
  ): ConsumerDriver<AmazonMqDelivery> {
    return new ConsumerDriver(
      {
        handler,
        settle: new AmazonMqSettle(this.copies),
        journal: options.journal,
        logger: this.config.logger,
      },
      { consumer: this.config.consumer },
    );
  }

  parkingLot(): ParkingLot {
    return rabbitParkingLot({ connection: this.connection, copies: this.copies });
  }

  /**
   * Counts over AMQP (`queue.declare` passive: exact and immediate) for ready, retrying and
   * parked; the management API (refreshed every few seconds) for unacknowledged and held for
   * dead lettering, when it answers. RabbitMQ does not expose the age of a quorum queue's head.
   * Rejects with `TransportUnavailableError` when the broker does not answer.
   */
  async inspect(): Promise<Inspection> {
    // A queue that does not exist counts as empty; a broker that does not answer is an error.
    const ready = (queue: string) =>
      this.withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount).catch(
        (err: unknown) => {
          if (/NOT_FOUND|404/.test((err as Error).message)) return 0;
          throw err;
        },
      );
    const retryQueues = rabbitRetryDelays(this.config.budget).map(retryQueueName);
    const [inventory, parked, ...retrying] = await Promise.all([
      ready(RABBITMQ_NAMES.inventoryQueue),
      ready(RETRY_NAMES.parkingQueue),
      ...retryQueues.map(ready),
    ]);
    let inFlight = 0;
    let held = 0;
    if (this.config.managementUrl) {
      const q = await this.management()
        .then((m) =>
          m.request<{ messages_unacknowledged?: number; messages_dlx?: number }>(
            'GET',
            `/api/queues/${encodeURIComponent(this.config.vhost)}/${encodeURIComponent(RABBITMQ_NAMES.inventoryQueue)}`,
          ),
        )
        .catch(() => undefined);
      inFlight = q?.messages_unacknowledged ?? 0;
      held = q?.messages_dlx ?? 0;
    }
    return {
      ready: inventory ?? 0,
      inFlight,
      retrying: retrying.reduce((a, b) => a + b, 0),
      parked: parked ?? 0,
      heldForDeadLettering: held,
    };
  }

  /** Runs `fn` on a channel of its own (topology changes, lab controls), closed afterwards. */
  withChannel<T>(fn: (ch: ConfirmChannel) => Promise<T>, timeoutMs?: number): Promise<T> {
    return this.connection.withChannel(fn, timeoutMs);
  }

  /** A channel owned by the caller (the Amazon MQ trigger emulation consumes on it). */
  openChannel(timeoutMs?: number): Promise<ConfirmChannel> {
    return this.connection.openChannel(timeoutMs);
  }

  private closed = false;

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const c of this.consumers) await c.stop().catch(() => {});
    await Promise.all([this.publishChannel.reset(), this.copiesChannel.reset()]);
    await this.connection.close();
  }
}

/** The RabbitMQ backend from its configuration. */
export function rabbitmqBackend(config: RabbitMqBackendConfig): RabbitMqBackend {
  return new RabbitMqBackend(config);
}

/**
 * The RabbitMQ backend's configuration from the runtime environment: the local broker
 * (`AMQP_URL`, `RABBITMQ_MANAGEMENT_URL`), or the deployed Amazon MQ broker when
 * `BROKER_SECRET_ARN` is set (its endpoints and virtual host from the environment, the
 * credentials from `credentials()`, read on first connect and never from the environment).
 */
export function rabbitmqConfigFromEnv(
  env: Env,
  base: Pick<RabbitMqBackendConfig, 'budget' | 'retention' | 'consumer'> &
    Partial<RabbitMqBackendConfig> & {
      credentials?: () => Promise<BrokerCredentials>;
    },
): RabbitMqBackendConfig {
  const { credentials, ...rest } = base;
  const publish = {
    window: env.PUBLISH_WINDOW,
    confirmTimeoutMs: env.PUBLISH_TIMEOUT_MS,
    ...base.publish,
  };
  if (!env.BROKER_SECRET_ARN) {
    return {
      url: env.AMQP_URL,
      managementUrl: env.RABBITMQ_MANAGEMENT_URL,
      vhost: vhostOf(env.AMQP_URL),
      ...rest,
      publish,
    };
  }
  if (!credentials) throw new ConfigError('BROKER_SECRET_ARN is set but no credentials reader');
  const amqp = env.BROKER_AMQP_ENDPOINT;
  const management = env.BROKER_MANAGEMENT_ENDPOINT;
  if (!amqp) throw new ConfigError('BROKER_AMQP_ENDPOINT is not set');
  return {
    url: async () => withCredentials(amqp, await credentials(), env.BROKER_VHOST),
    ...(management
      ? { managementUrl: async () => withCredentials(management, await credentials()) }
      : {}),
    vhost: env.BROKER_VHOST,
    ...rest,
    publish,
  };
}
