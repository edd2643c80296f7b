import type { ConfirmChannel } from 'amqplib';
import { rabbitRetryDelays } from '../../config/budget.js';
import { DEFAULT_REDRIVE_LIMIT } from '../../config/env.js';
import { ConsumerDriver, type DriverNotices } from '../../consumer/driver.js';
import { runningWorkers } from '../../consumer/workers.js';
import type {
  Backend,
  Capabilities,
  ConsumeOptions,
  DeliveryJournal,
  MessageHandler,
  ParkingLot,
  ParkNotices,
  PrepareReport,
  Publisher,
  RunningConsumer,
  Stream,
} from '../../port/types.js';
import { type AmazonMqDelivery, AmazonMqSettle } from './AmazonMqSettle.js';
import { ConfirmedChannel } from './ConfirmedChannel.js';
import type { RabbitMqBackendConfig } from './config.js';
import { RABBITMQ_DEFAULTS } from './constants.js';
import { RabbitCopies } from './copies.js';
import { rabbitParkingLot } from './parking.js';
import { type RabbitInspection, reportQueueMetrics } from './queueMetrics.js';
import { RabbitConnection } from './RabbitConnection.js';
import { RabbitManagement } from './RabbitManagement.js';
import { RabbitPublisher } from './RabbitPublisher.js';
import { RabbitWorker } from './RabbitWorker.js';
import { RouteCheck } from './routes.js';
import {
  applyPolicies,
  buildPolicies,
  buildTopology,
  coreTopology,
  declareTopology,
  prepareTopology,
  queueNamesOf,
  type RabbitNames,
  rabbitNames,
  retryQueueOf,
} from './topology.js';

/** What the RabbitMQ backend can do (its module states the same). */
export const RABBITMQ_CAPABILITIES: Capabilities = {
  orderedPerKey: true,
  perMessageDelay: false,
  partialBatchResponse: true,
  redeliveryFlag: true,
  spontaneousDuplicates: false,
  brokerParking: true,
  publishDeduplication: false,
  consumeModes: ['worker', 'lambda'],
};

/**
 * The RabbitMQ backend (Amazon MQ in AWS), composed from configuration: one connection, the
 * topology and its policies, publishers, the worker and the Amazon MQ trigger's consumer side,
 * the parking lot and `inspect()`. Nothing connects until first use.
 */
export class RabbitMqBackend implements Backend {
  readonly transport = 'rabbitmq';
  readonly capabilities = RABBITMQ_CAPABILITIES;
  readonly connection: RabbitConnection;
  private readonly publishChannel: ConfirmedChannel;
  private readonly copiesChannel: ConfirmedChannel;
  /** The retry, park and redrive copies of each subscription's queue, made when first used. */
  private readonly copiesBySubscription = new Map<string, RabbitCopies>();
  /** The names of the configured topology. */
  readonly names: RabbitNames;
  private readonly publishers = new Map<string, Publisher>();
  private readonly consumers: RunningConsumer[] = [];
  private managementClient: Promise<RabbitManagement> | undefined;
  /** The routes the relay's publishes need (the core topology's consumer queues). */
  readonly routes: RouteCheck;
  /** What this process declares again after every reconnect (publishing, consuming). */
  private readonly redeclared = new Set<'publish' | 'consume'>();

  constructor(readonly config: RabbitMqBackendConfig) {
    this.connection = new RabbitConnection(
      {
        url: config.url,
        connectionName: config.connectionName ?? 'reliable-messaging',
        initialReconnectDelayMs: config.reconnect?.baseMs ?? RABBITMQ_DEFAULTS.reconnectBaseMs,
        maxReconnectDelayMs: config.reconnect?.maxMs ?? RABBITMQ_DEFAULTS.reconnectMaxMs,
        ...(config.reconnect?.healthyAfterMs !== undefined
          ? { healthyAfterMs: config.reconnect.healthyAfterMs }
          : {}),
        ...(config.heartbeatSeconds !== undefined
          ? { heartbeatSeconds: config.heartbeatSeconds }
          : {}),
      },
      config.logger,
    );
    const connectTimeoutMs = config.publish?.connectTimeoutMs;
    this.publishChannel = new ConfirmedChannel(this.connection, { connectTimeoutMs });
    this.copiesChannel = new ConfirmedChannel(this.connection, { connectTimeoutMs });
    this.names = rabbitNames(config.topology);
    const check = config.routeCheck === false ? {} : (config.routeCheck ?? {});
    this.routes = new RouteCheck(
      {
        management: config.managementUrl ? () => this.management() : undefined,
        vhost: config.vhost,
        topology: coreTopology(this.names),
        logger: config.logger,
        onStatus: config.onRouteStatus,
      },
      {
        ...check,
        // a publisher marks on a look until its cache expires and that batch's confirms are in
        staleMs:
          (check.intervalMs ?? RABBITMQ_DEFAULTS.routeCheckIntervalMs) +
          (check.timeoutMs ?? RABBITMQ_DEFAULTS.routeCheckTimeoutMs) +
          (config.publish?.confirmTimeoutMs ?? RABBITMQ_DEFAULTS.confirmTimeoutMs),
      },
    );
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
      const core = coreTopology(this.names);
      await this.withChannel((ch) => declareTopology(ch, core), 10_000);
      return { queues: core.queues.length, policies: 0 };
    }
    const management = await this.management();
    await prepareTopology({
      channel: (fn) => this.withChannel(fn, 30_000),
      management,
      vhost: this.config.vhost,
      names: this.names,
      budget: this.config.budget,
      retention: this.config.retention,
      policy: {
        deliveryLimit: this.config.deliveryLimit ?? RABBITMQ_DEFAULTS.deliveryLimit,
        resultsDeliveryLimit:
          this.config.resultsDeliveryLimit ?? RABBITMQ_DEFAULTS.resultsDeliveryLimit,
      },
    });
    return {
      queues: buildTopology(this.names, this.config.budget).queues.length,
      policies: buildPolicies(this.names, this.config.budget, this.config.retention).length,
      server: `RabbitMQ ${await management.version()}`,
    };
  }

  /** Re-applies the policies, e.g. with another delivery limit (lab controls). */
  async applyPolicies(options: { deliveryLimit?: number; only?: string[] } = {}): Promise<void> {
    const policies = buildPolicies(this.names, this.config.budget, this.config.retention, {
      deliveryLimit: options.deliveryLimit ?? this.config.deliveryLimit,
      resultsDeliveryLimit: this.config.resultsDeliveryLimit,
    }).filter((p) => !options.only || options.only.includes(p.name));
    await applyPolicies(await this.management(), this.config.vhost, policies);
  }

  async ready(timeoutMs = 5_000): Promise<void> {
    await this.publishChannel.ready(timeoutMs);
  }

  /**
   * The publisher of a stream (its exchange; default: the first stream of the topology), or of
   * any exchange by name.
   */
  publisher(
    stream: Stream = Object.keys(this.names.exchanges)[0] ?? '',
    options: { exchange?: string } = {},
  ): Publisher {
    const exchange = options.exchange ?? this.names.exchanges[stream];
    if (!exchange) throw new Error(`no RabbitMQ exchange for stream "${stream}"`);
    let p = this.publishers.get(exchange);
    if (!p) {
      this.redeclareOnConnect('publish');
      p = new RabbitPublisher(
        {
          channel: this.publishChannel,
          ...(this.config.routeCheck === false ? {} : { routes: this.routes }),
        },
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

  /**
   * Worker-mode consumers of a subscription's queue (default: the first) in this process,
   * started: `concurrency` channels, each with its own transaction.
   */
  async consume(handler: MessageHandler, options: ConsumeOptions = {}): Promise<RunningConsumer> {
    this.redeclareOnConnect('consume');
    const copies = this.copiesOf(options.queue);
    const workers = Array.from(
      { length: options.concurrency ?? 1 },
      () =>
        new RabbitWorker(
          {
            connection: this.connection,
            copies,
            resetCopies: () => this.copiesChannel.reset(),
            handler,
            journal: options.journal,
            logger: this.config.logger,
            notices: this.notices(options.notices),
          },
          {
            queue: copies.names.queue,
            consumer: this.config.consumer,
            onParkRefused: this.config.onParkRefused,
            prefetch: options.prefetch,
            maxBatch: options.maxBatch,
            reconnectBaseMs: options.reconnectBaseMs ?? this.config.reconnect?.baseMs,
            reconnectMaxMs: options.reconnectMaxMs ?? this.config.reconnect?.maxMs,
          },
        ),
    );
    for (const w of workers) await w.start();
    const running = runningWorkers(workers);
    this.consumers.push(running);
    return running;
  }

  /**
   * Declares the topology this process depends on after every (re)connect, before channels are
   * handed out: the event exchanges for publishers, the worker's queues and bindings (retry
   * buckets and parking included) for consumers. Policies live on the vhost and apply again by
   * themselves. A queue or exchange deleted while the process was disconnected is back.
   */
  private redeclareOnConnect(scope: 'publish' | 'consume'): void {
    if (this.redeclared.has(scope)) return;
    this.redeclared.add(scope);
    const topology =
      scope === 'publish'
        ? { exchanges: coreTopology(this.names).exchanges, queues: [] }
        : buildTopology(this.names, this.config.budget);
    this.connection.declareOnConnect((ch) => declareTopology(ch, topology));
  }

  /** The retry, park and redrive copies of a subscription's queue (default: the first). */
  private copiesOf(subscription?: string): RabbitCopies {
    const names = queueNamesOf(this.names, this.config.topology, subscription);
    let copies = this.copiesBySubscription.get(names.subscription);
    if (!copies) {
      copies = new RabbitCopies(this.copiesChannel, names, {
        budget: this.config.budget,
        confirmTimeoutMs: this.config.publish?.confirmTimeoutMs,
      });
      this.copiesBySubscription.set(names.subscription, copies);
    }
    return copies;
  }

  /** The consumer driver behind the Amazon MQ trigger, for a subscription (default: the first). */
  amazonMqDriver(
    handler: MessageHandler,
    options: {
      journal?: DeliveryJournal | undefined;
      notices?: ParkNotices | undefined;
      queue?: string | undefined;
    } = {},
  ): ConsumerDriver<AmazonMqDelivery> {
    return new ConsumerDriver(
      {
        handler,
        settle: new AmazonMqSettle(this.copiesOf(options.queue)),
        journal: options.journal,
        logger: this.config.logger,
        notices: this.notices(options.notices),
      },
      { consumer: this.config.consumer, onParkRefused: this.config.onParkRefused },
    );
  }

  /** A use case's park notices with this backend's publisher of their stream. */
  private notices(notices: ParkNotices | undefined): DriverNotices | undefined {
    return notices && { build: notices.build, publisher: this.publisher(notices.stream) };
  }

  parkingLot(): ParkingLot {
    return rabbitParkingLot({
      connection: this.connection,
      copies: this.copiesOf(),
      redriveLimit: this.config.retention.redriveLimit ?? DEFAULT_REDRIVE_LIMIT,
    });
  }

  /**
   * Counts over AMQP (`queue.declare` passive: exact and immediate) for ready, retrying and
   * parked; the management API (refreshed every few seconds) for unacknowledged and held for
   * dead lettering, when it answers. RabbitMQ does not expose the age of a quorum queue's head.
   * Rejects with `TransportUnavailableError` when the broker does not answer.
   */
  async inspect(): Promise<RabbitInspection> {
    // A queue that does not exist counts as empty; a broker that does not answer is an error.
    const ready = (queue: string) =>
      this.withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount).catch(
        (err: unknown) => {
          if (/NOT_FOUND|404/.test((err as Error).message)) return 0;
          throw err;
        },
      );
    // the first subscription's queue, its retries and parking; the bounded queues of the rest
    const main = queueNamesOf(this.names, this.config.topology);
    const retryQueues =
      main.failures === 'retries'
        ? rabbitRetryDelays(this.config.budget).map((d) => retryQueueOf(main, d))
        : [];
    const others = this.names.queues.filter((q) => q !== main);
    const bounded = [
      ...this.names.taps.map((t) => t.queue),
      ...others.flatMap((q) => [q.queue, q.parkingQueue]),
    ];
    const [source = 0, parked = 0, ...counts] = await Promise.all([
      ready(main.queue),
      ready(main.parkingQueue),
      ...bounded.map(ready),
      ...retryQueues.map(ready),
    ]);
    const boundedReady = counts.slice(0, bounded.length);
    const retrying = counts.slice(bounded.length);
    // A fresh look at the routes (not the publishers' cache): undefined when it cannot be known.
    const looks = await Promise.all(
      Object.values(this.names.exchanges).map((x) => this.routes.status(x, 0)),
    );
    const routesMissing = looks.every((l) => l !== undefined)
      ? Object.assign({}, ...looks.map((l) => l?.missingByQueue))
      : undefined;
    // In flight and held for dead lettering: only the management API knows (one call, every queue
    // of the vhost). Held copies count towards a queue's `max-length` although they are not
    // ready (measured on 3.10: a retry queue whose requeue route is gone refuses copies once its
    // expired ones reach the bound), so a bound's metric is ready + held.
    const stats = new Map<string, { messages_unacknowledged?: number; messages_dlx?: number }>();
    if (this.config.managementUrl) {
      const list = await this.management()
        .then((m) =>
          m.request<{ name: string; messages_unacknowledged?: number; messages_dlx?: number }[]>(
            'GET',
            `/api/queues/${encodeURIComponent(this.config.vhost)}?columns=name,messages_unacknowledged,messages_dlx`,
          ),
        )
        .catch(() => undefined);
      for (const q of list ?? []) stats.set(q.name, q);
    }
    const inFlight = stats.get(main.queue)?.messages_unacknowledged ?? 0;
    const held = stats.get(main.queue)?.messages_dlx ?? 0;
    const length = (queue: string, ready: number | undefined) =>
      (ready ?? 0) + (stats.get(queue)?.messages_dlx ?? 0);
    return {
      queue: main.queue,
      parkingQueue: main.parkingQueue,
      ready: source,
      inFlight,
      retrying: retrying.reduce((a, b) => a + b, 0),
      parked,
      heldForDeadLettering: held,
      // What `max-length` counts (ready, and held for dead lettering where the management API
      // answers): these are what the bounds and their alarms compare. A tap's bound drops its
      // oldest, never holds: its ready count.
      bounded: {
        ...Object.fromEntries(
          bounded.map((q, i) => [
            q,
            this.names.taps.some((t) => t.queue === q)
              ? (boundedReady[i] ?? 0)
              : length(q, boundedReady[i]),
          ]),
        ),
        ...Object.fromEntries(retryQueues.map((q, i) => [q, length(q, retrying[i])])),
      },
      routesMissing,
    };
  }

  async reportMetrics(): Promise<void> {
    if (this.config.queueMetrics)
      await reportQueueMetrics(() => this.inspect(), this.config.logger);
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
