import type { Consumer } from '@nats-io/jetstream';
import { z } from 'zod';
import { ConfigError, DEFAULT_REDRIVE_LIMIT, type Env } from '../../config/env.js';
import { ConsumerDriver, type DriverNotices, type ParkRefused } from '../../consumer/driver.js';
import { runningWorkers } from '../../consumer/workers.js';
import {
  type Backend,
  type Capabilities,
  type ConsumeOptions,
  type Inspection,
  type MessageHandler,
  type ParkingLot,
  type ParkNotices,
  type PrepareReport,
  type Publisher,
  type RunningConsumer,
  type Stream,
  subscriptionOf,
} from '../../port/types.js';
import { type BackendBase, backendBaseSchema, type TransportModule } from '../module.js';
import { budgetDeliveries, defaultMaxDeliver, NATS_DEFAULTS } from './constants.js';
import { NatsClient } from './NatsClient.js';
import { NatsPublisher } from './NatsPublisher.js';
import { NatsSettle } from './NatsSettle.js';
import { NatsWorker } from './NatsWorker.js';
import { natsParkingLot } from './parking.js';
import {
  type ConsumerNames,
  consumerConfig,
  ensureConsumer,
  ensureStream,
  isMissing,
  type NatsNames,
  natsNames,
  parkingStreamConfig,
  type TopologySettings,
  workStreamConfig,
} from './topology.js';

/** Where the server is and how this backend uses it (defaults: `NATS_DEFAULTS`, with reasons). */
export interface NatsBackendConfig extends BackendBase {
  /** The server URL(s) (`nats://host:4222`). */
  servers: string | string[];
  /** Starts every stream, consumer and subject name (tests and labs sharing one server). */
  prefix?: string;
  /** AckWait: how long a delivery may stay unsettled before JetStream delivers it again. */
  ackWaitMs?: number;
  /** MaxDeliver of a `retries` subscription's consumer; default: the budget's deliveries and a margin. */
  maxDeliver?: number;
  /** MaxDeliver of a `redelivery` subscription's consumer; default: none (-1). */
  redeliveryMaxDeliver?: number;
  /** MaxAckPending of each consumer (unsettled deliveries, nak delays included). */
  maxAckPending?: number;
  /** The streams' duplicate window (`Nats-Msg-Id`). */
  duplicateWindowMs?: number;
  /** Messages a work stream holds at most before it refuses publishes. */
  maxMessages?: number;
  replicas?: number;
  publish?: { window?: number; timeoutMs?: number };
  ackTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** A worker's backoff after a give-back. */
  reconnect?: { baseMs?: number; maxMs?: number };
  connectionName?: string;
  /** Called when parking refused a consumer's copy (the `ParkRefused` metric). */
  onParkRefused?: (refused: ParkRefused) => void;
}

/** What `inspect` adds: messages JetStream will not deliver again and moved nowhere. */
type NatsInspection = Inspection & {
  /**
   * Held by the work stream past MaxDeliver (JetStream only stops delivering them and sends a
   * `MAX_DELIVERIES` advisory): the stream's messages less the consumer's pending and unsettled
   * ones, approximate while messages move.
   */
  undeliverable: number;
};

const CAPABILITIES: Capabilities = {
  // one durable pull consumer per stream delivers in stream order
  orderedPerKey: true,
  // nak(delay): each message waits its own delay
  perMessageDelay: true,
  partialBatchResponse: true,
  redeliveryFlag: true,
  spontaneousDuplicates: false,
  // past MaxDeliver JetStream stops delivering and sends an advisory: it moves nothing anywhere
  brokerParking: false,
  // Nats-Msg-Id within the stream's duplicate window
  publishDeduplication: true,
  consumeModes: ['worker'],
};

/**
 * The NATS JetStream backend, composed from configuration: one connection, the work streams
 * (one per outbox table), their durable pull consumers and the parking stream, publishers, the
 * worker, the parking lot and `inspect()`. Nothing connects until first use.
 */
class NatsBackend implements Backend {
  readonly transport = 'nats-jetstream';
  readonly capabilities = CAPABILITIES;
  private readonly client: NatsClient;
  private readonly names: NatsNames;
  private readonly topology: TopologySettings;
  private readonly publishers = new Map<Stream, Publisher>();
  private readonly consumers: RunningConsumer[] = [];
  private closed = false;

  constructor(readonly config: NatsBackendConfig) {
    this.names = natsNames(config.prefix ?? '', config.topology);
    this.client = new NatsClient(
      {
        servers: config.servers,
        name: config.connectionName ?? 'reliable-messaging',
        connectTimeoutMs: config.connectTimeoutMs ?? NATS_DEFAULTS.connectTimeoutMs,
        requestTimeoutMs: this.publishTimeoutMs,
      },
      config.logger,
    );
    this.topology = {
      ackWaitMs: config.ackWaitMs ?? NATS_DEFAULTS.ackWaitMs,
      maxDeliver: config.maxDeliver ?? defaultMaxDeliver(config.budget),
      redeliveryMaxDeliver: config.redeliveryMaxDeliver ?? NATS_DEFAULTS.redeliveryMaxDeliver,
      maxAckPending: config.maxAckPending ?? NATS_DEFAULTS.maxAckPending,
      duplicateWindowMs: config.duplicateWindowMs ?? NATS_DEFAULTS.duplicateWindowMs,
      maxMessages: config.maxMessages ?? NATS_DEFAULTS.maxMessages,
      replicas: config.replicas ?? NATS_DEFAULTS.replicas,
      parkingMs: config.retention.parkingMs,
    };
  }

  private get publishTimeoutMs(): number {
    return this.config.publish?.timeoutMs ?? NATS_DEFAULTS.publishTimeoutMs;
  }

  /**
   * `publish`: the work streams (the relay); `consume` (default): also the parking stream and
   * the durable consumers. Creates or updates each, so it is idempotent.
   */
  async prepare(scope: 'publish' | 'consume' = 'consume'): Promise<PrepareReport> {
    const jsm = await this.client.jsm();
    const streams = Object.values(this.names.streams);
    for (const names of streams) {
      await ensureStream(jsm, workStreamConfig(names, this.topology));
    }
    const server = `NATS ${(await this.client.connection()).info?.version ?? 'unknown'}`;
    if (scope === 'publish') return { queues: streams.length, policies: 0, server };
    await ensureStream(jsm, parkingStreamConfig(this.names.parking, this.topology));
    const consumers = Object.values(this.names.consumers);
    for (const c of consumers) {
      const maxDeliver =
        c.failures === 'retries' ? this.topology.maxDeliver : this.topology.redeliveryMaxDeliver;
      await ensureConsumer(jsm, c.stream, consumerConfig(c, maxDeliver, this.topology));
    }
    return { queues: streams.length + 1 + consumers.length, policies: 0, server };
  }

  async ready(timeoutMs = 5_000): Promise<void> {
    await this.client.ready(timeoutMs);
  }

  /** The publisher of a stream (default: the first of the topology). */
  publisher(stream: Stream = Object.keys(this.names.streams)[0] ?? ''): Publisher {
    const names = this.names.streams[stream];
    if (!names) throw new Error(`no NATS stream for stream "${stream}"`);
    let p = this.publishers.get(stream);
    if (!p) {
      p = new NatsPublisher(this.client, {
        subjectRoot: names.subjectRoot,
        window: this.config.publish?.window ?? NATS_DEFAULTS.publishWindow,
        timeoutMs: this.publishTimeoutMs,
        readyTimeoutMs: NATS_DEFAULTS.connectTimeoutMs,
      });
      this.publishers.set(stream, p);
    }
    return p;
  }

  /**
   * Workers of the inventory consumer (or of the results consumer) in this process, started:
   * `concurrency` subscriptions to the same durable consumer, each with its own transaction.
   */
  async consume(handler: MessageHandler, options: ConsumeOptions = {}): Promise<RunningConsumer> {
    const queue = subscriptionOf(this.config.topology, options.queue).name;
    const prefetch = options.prefetch ?? NATS_DEFAULTS.prefetch;
    if (!Number.isInteger(prefetch) || prefetch < 1) {
      throw new RangeError(`prefetch must be a whole number ≥ 1, got ${options.prefetch}`);
    }
    await this.openConsumer(queue); // a missing server or a bad configuration fails here
    const workers = Array.from(
      { length: options.concurrency ?? 1 },
      () =>
        new NatsWorker(
          {
            open: () => this.openConsumer(queue),
            driver: (giveBack) => this.driver(handler, queue, options, giveBack),
            logger: this.config.logger,
          },
          {
            queue: this.consumerNames(queue).name,
            prefetch,
            maxBatch: options.maxBatch ?? prefetch,
            reconnectBaseMs:
              options.reconnectBaseMs ??
              this.config.reconnect?.baseMs ??
              NATS_DEFAULTS.reconnectBaseMs,
            reconnectMaxMs:
              options.reconnectMaxMs ??
              this.config.reconnect?.maxMs ??
              NATS_DEFAULTS.reconnectMaxMs,
          },
        ),
    );
    for (const w of workers) w.start();
    const running = runningWorkers(workers);
    this.consumers.push(running);
    return running;
  }

  /** The consumer driver of one worker, around its settle. */
  private driver(
    handler: MessageHandler,
    queue: string,
    options: ConsumeOptions,
    giveBack: ConstructorParameters<typeof NatsSettle>[0]['giveBack'],
  ) {
    const settle = new NatsSettle(
      { client: this.client, giveBack },
      {
        parkingSubject: this.consumerNames(queue).parkingSubject,
        ackTimeoutMs: this.config.ackTimeoutMs ?? NATS_DEFAULTS.ackTimeoutMs,
        publishTimeoutMs: this.publishTimeoutMs,
        ackWaitMs: this.topology.ackWaitMs,
        jitter: this.config.budget.jitter,
      },
    );
    return new ConsumerDriver(
      {
        handler,
        settle,
        journal: options.journal,
        logger: this.config.logger,
        notices: this.notices(options.notices),
      },
      { consumer: this.config.consumer, onParkRefused: this.config.onParkRefused },
    );
  }

  /** A use case's park notices with this backend's publisher of their stream. */
  private notices(notices: ParkNotices | undefined): DriverNotices | undefined {
    return notices
      ? { build: notices.build, publisher: this.publisher(notices.stream) }
      : undefined;
  }

  /**
   * The durable consumer to pull from. A consumer or stream that is gone (deleted by an
   * operator, a server that lost its state) is declared again, as RabbitMQ workers declare their
   * queues after a reconnect.
   */
  private async openConsumer(queue: string): Promise<Consumer> {
    const { stream, name } = this.consumerNames(queue);
    const js = await this.client.js();
    try {
      return await js.consumers.get(stream, name);
    } catch (err) {
      if (!isMissing(err)) throw err;
      this.config.logger?.warn('NATS consumer missing: declaring it again', { stream, name });
      await this.prepare('consume');
      return js.consumers.get(stream, name);
    }
  }

  /** A subscription's consumer names. */
  private consumerNames(queue: string | undefined): ConsumerNames {
    return this.names.consumers[subscriptionOf(this.config.topology, queue).name] as ConsumerNames;
  }

  /** The parked messages of the default subscription (its subject of the parking stream). */
  parkingLot(): ParkingLot {
    return natsParkingLot(this.client, {
      stream: this.names.parking.stream,
      subject: this.consumerNames(undefined).parkingSubject,
      redriveLimit: this.config.retention.redriveLimit ?? DEFAULT_REDRIVE_LIMIT,
      publishTimeoutMs: this.publishTimeoutMs,
    });
  }

  /**
   * The inventory consumer's counts: ready is `num_pending` (not delivered yet), in flight is
   * `num_ack_pending` (delivered, unsettled). A message waiting out a nak delay is ack-pending
   * to JetStream, so it counts in flight: `retrying` is not known apart and stays 0. Parked: the
   * consumer's subject of the parking stream. A stream or consumer that is gone counts as empty.
   */
  async inspect(): Promise<NatsInspection> {
    const jsm = await this.client.jsm();
    const c = this.consumerNames(undefined);
    // the stream first: a message published in between raises only the consumer's count
    const stream = await jsm.streams.info(c.stream).catch(() => undefined);
    const consumer = await jsm.consumers.info(c.stream, c.name).catch(() => undefined);
    const parking = await jsm.streams
      .info(this.names.parking.stream, { subjects_filter: c.parkingSubject })
      .catch(() => undefined);
    const ready = consumer?.num_pending ?? 0;
    const inFlight = consumer?.num_ack_pending ?? 0;
    return {
      ready,
      inFlight,
      retrying: 0,
      parked: parking?.state.subjects?.[c.parkingSubject] ?? 0,
      heldForDeadLettering: 0,
      undeliverable: Math.max(0, (stream?.state.messages ?? 0) - ready - inFlight),
    };
  }

  /** Stops this process's consumers (their batches settled), then drains the connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const c of this.consumers) await c.stop().catch(() => {});
    await this.client.close();
  }
}

/** The NATS variables, read by this module only (the shared configuration does not know them). */
const natsEnvSchema = z.object({
  /** Server URLs, comma-separated. */
  NATS_URL: z.string().default(NATS_DEFAULTS.servers),
  NATS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]{0,64}$/)
    .default(''),
  NATS_ACK_WAIT_MS: z.coerce.number().int().positive().optional(),
  NATS_MAX_DELIVER: z.coerce.number().int().min(-1).optional(),
  NATS_MAX_ACK_PENDING: z.coerce.number().int().positive().optional(),
  NATS_DUPLICATE_WINDOW_MS: z.coerce.number().int().positive().optional(),
  NATS_REPLICAS: z.coerce.number().int().min(1).max(5).optional(),
});

/**
 * The NATS backend's configuration from the runtime environment: its own variables (`NATS_URL`,
 * `NATS_PREFIX`, `NATS_ACK_WAIT_MS`, `NATS_MAX_DELIVER`, `NATS_MAX_ACK_PENDING`,
 * `NATS_DUPLICATE_WINDOW_MS`, `NATS_REPLICAS`) from `vars`, the publish window and timeout
 * from the shared configuration (`PUBLISH_WINDOW`, `PUBLISH_TIMEOUT_MS`).
 */
function natsConfigFromEnv(
  env: Env,
  base: BackendBase & Partial<NatsBackendConfig>,
  vars: NodeJS.ProcessEnv = process.env,
): NatsBackendConfig {
  const parsed = natsEnvSchema.safeParse(
    Object.fromEntries(Object.entries(vars).filter(([, v]) => v !== undefined && v !== '')),
  );
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid NATS configuration: ${lines.join('; ')}`);
  }
  const v = parsed.data;
  const optional = <K extends keyof NatsBackendConfig>(key: K, value: NatsBackendConfig[K]) =>
    value === undefined ? {} : { [key]: value };
  return {
    servers: v.NATS_URL.split(',').map((s) => s.trim()),
    prefix: v.NATS_PREFIX,
    ...optional('ackWaitMs', v.NATS_ACK_WAIT_MS),
    ...optional('maxDeliver', v.NATS_MAX_DELIVER),
    ...optional('maxAckPending', v.NATS_MAX_ACK_PENDING),
    ...optional('duplicateWindowMs', v.NATS_DUPLICATE_WINDOW_MS),
    ...optional('replicas', v.NATS_REPLICAS),
    ...base,
    publish: { window: env.PUBLISH_WINDOW, timeoutMs: env.PUBLISH_TIMEOUT_MS, ...base.publish },
  };
}

const positive = z.number().int().positive();
const deliveries = z
  .number()
  .int()
  .refine((n) => n === -1 || n >= 1, 'a number of deliveries ≥ 1, or -1 for no limit');

/** What `NatsBackendConfig` must hold, checked before the backend is built. */
const configSchema = backendBaseSchema
  .extend({
    servers: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
    prefix: z
      .string()
      .regex(
        /^[A-Za-z0-9_-]{0,64}$/,
        'letters, digits, "_" and "-" only: it starts stream names, which take no ".", "*", ">" or spaces',
      )
      .optional(),
    ackWaitMs: positive.optional(),
    maxDeliver: deliveries.optional(),
    redeliveryMaxDeliver: deliveries.optional(),
    maxAckPending: positive.optional(),
    duplicateWindowMs: positive.optional(),
    maxMessages: positive.optional(),
    replicas: z.number().int().min(1).max(5).optional(),
    publish: z.object({ window: positive.optional(), timeoutMs: positive.optional() }).optional(),
    ackTimeoutMs: positive.optional(),
    connectTimeoutMs: positive.optional(),
    reconnect: z.object({ baseMs: positive.optional(), maxMs: positive.optional() }).optional(),
    connectionName: z.string().optional(),
    onParkRefused: z
      .custom<(refused: ParkRefused) => void>((v) => typeof v === 'function')
      .optional(),
  })
  .superRefine((c, ctx) => {
    // JetStream must not stop delivering a message the consumer would still retry: its own
    // parking comes first.
    const needed = budgetDeliveries(c.budget);
    if (c.maxDeliver !== undefined && c.maxDeliver !== -1 && c.maxDeliver <= needed) {
      ctx.addIssue({
        code: 'custom',
        path: ['maxDeliver'],
        message: `${c.maxDeliver} deliveries do not cover the retry budget's ${needed}: raise it above`,
      });
    }
  });

export { natsNames } from './topology.js';
export type { NatsBackend };

/** The NATS JetStream backend as a module. */
export const natsModule: TransportModule<NatsBackendConfig, NatsBackend> = {
  name: 'nats-jetstream',
  description:
    'NATS JetStream (self-hosted, or Synadia Cloud; nothing here deploys it): work-queue streams, durable pull consumers, nak delays, a parking stream',
  capabilities: CAPABILITIES,
  configSchema,
  fromEnv: (env, base) => natsConfigFromEnv(env, base),
  create: (config) => new NatsBackend(config),
};
