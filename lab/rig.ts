import {
  DeleteQueueCommand,
  type MessageAttributeValue,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { ConfirmChannel } from 'amqplib';
import type { Context } from 'aws-lambda';
import { startHttpApi } from '../devkit/emulators/httpApi.js';
import { type JournalLine, JournalRecorder } from '../devkit/journalRecorder.js';
import {
  amqpUrlVia,
  createScratchDatabase,
  createScratchVhost,
  proxiedDatabase,
  type ScratchDatabase,
  type ScratchVhost,
  scratchName,
} from '../devkit/scratch.js';
import { TcpProxy } from '../devkit/tcpProxy.js';
import { AmazonMqTrigger } from '../devkit/triggers/amazonMqTrigger.js';
import { SqsTrigger } from '../devkit/triggers/sqsTrigger.js';
import { waitFor } from '../devkit/waitFor.js';
import { createPlaceOrderHandler } from '../functions/place-order/handler.js';
import { createReserveInventoryRabbitHandler } from '../functions/reserve-inventory-rabbitmq/handler.js';
import { createReserveInventorySqsHandler } from '../functions/reserve-inventory-sqs/handler.js';
import { DEFAULT_RETENTION, type RetryBudget } from '../shared/config/budget.js';
import { RABBITMQ_NAMES, SCHEMA_VERSION_HEADER } from '../shared/config/constants.js';
import type { ParkingLot } from '../shared/consumer/parking.js';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import type { SqlDatabase } from '../shared/db/types.js';
import type { Envelope } from '../shared/envelope/envelope.js';
import { FaultScope } from '../shared/faults.js';
import { ReserveInventory } from '../shared/inventory/ReserveInventory.js';
import { setStock } from '../shared/inventory/stock.js';
import { createLogger } from '../shared/logger.js';
import { OrderService } from '../shared/orders/OrderService.js';
import { OutboxRelay } from '../shared/outbox/OutboxRelay.js';
import { OutboxStore } from '../shared/outbox/OutboxStore.js';
import { rabbitParkingLot } from '../shared/transport/rabbitmq/parking.js';
import { RabbitConnection } from '../shared/transport/rabbitmq/RabbitConnection.js';
import { RabbitPublisher } from '../shared/transport/rabbitmq/RabbitPublisher.js';
import { RabbitSettler } from '../shared/transport/rabbitmq/RabbitSettler.js';
import { RabbitWorker } from '../shared/transport/rabbitmq/RabbitWorker.js';
import {
  applyPolicies,
  buildPolicies,
  prepareInventoryTopology,
  RETRY_NAMES,
} from '../shared/transport/rabbitmq/topology.js';
import { createSqsClient } from '../shared/transport/sqs/client.js';
import { sqsQueueNames } from '../shared/transport/sqs/names.js';
import { sqsParkingLot } from '../shared/transport/sqs/parking.js';
import { defaultSqsQueueSettings, ensureSqsQueues } from '../shared/transport/sqs/queues.js';
import { SqsPublisher } from '../shared/transport/sqs/SqsPublisher.js';
import { SqsSettler } from '../shared/transport/sqs/SqsSettler.js';
import type { Publisher } from '../shared/transport/types.js';
import { sleep } from '../shared/util/async.js';
import type { Configuration } from './configurations.js';
import { ReservationFailures } from './dbControls.js';
import type { LabServices, LabSettings } from './settings.js';
import type { TimelineKind } from './types.js';

export interface RigOptions {
  /** Overrides of the retry budget for this scenario (e.g. `maxAttempts: 0`: park at once). */
  budget?: Partial<RetryBudget>;
}

/** A message put on the transport as it is, for poison messages. */
export interface RawMessage {
  body: Buffer | string;
  messageId?: string;
  type?: string;
  schemaVersion?: string;
  /** Default: the type, else `order.created`. */
  routingKey?: string;
}

/**
 * Publishes messages as they are to the `orders` exchange on a confirm channel and waits for the
 * confirms: poison messages, or envelopes the relay did not write (the lab and the tests).
 */
export async function publishRawOrders(ch: ConfirmChannel, messages: RawMessage[]): Promise<void> {
  for (const m of messages) {
    ch.publish(
      RABBITMQ_NAMES.ordersExchange,
      m.routingKey ?? m.type ?? 'order.created',
      Buffer.from(m.body),
      {
        persistent: true,
        contentType: 'application/json',
        ...(m.messageId ? { messageId: m.messageId } : {}),
        ...(m.type ? { type: m.type } : {}),
        headers: m.schemaVersion ? { [SCHEMA_VERSION_HEADER]: m.schemaVersion } : {},
      },
    );
  }
  await ch.waitForConfirms();
}

export interface Mark {
  at: number;
  kind: TimelineKind;
  label: string;
}

export interface ConsumerOptions {
  /** The database the consumer uses (default: the run's own, direct). */
  db?: SqlDatabase;
  /** Consumers (worker channels) or invocations at once (SQS trigger). */
  concurrency?: number;
}

/** Created on first use, so the entry point's POWERTOOLS_LOG_LEVEL applies (imports run first). */
let labLogger: ReturnType<typeof createLogger> | undefined;
const log = () => {
  labLogger ??= createLogger('lab');
  return labLogger;
};

/**
 * Everything one scenario run needs on one configuration, all of its own: a database, a virtual
 * host or a queue prefix, the HTTP API, the relay, the consumer (worker or trigger emulation), a
 * journal that records every consumer step with its time, a fault scope, and controls (cut the
 * database, cut the broker, remove a route or the parking lot). Transport-neutral: one subclass
 * per transport.
 */
export abstract class Rig {
  readonly recorder = new JournalRecorder();
  readonly faults = new FaultScope();
  readonly marks: Mark[] = [];
  readonly budget: RetryBudget;
  readonly failures: ReservationFailures;
  /** What a scenario observed on the way (relay round results, errors read back), for its checks. */
  readonly facts: Record<string, unknown> = {};
  /** When the scenario started (its setup excluded). */
  t0 = Date.now();
  protected readonly closers: (() => Promise<unknown>)[] = [];
  private apiUrl: string | undefined;

  protected constructor(
    readonly configuration: Configuration,
    readonly settings: LabSettings,
    readonly services: LabServices,
    readonly scratch: ScratchDatabase,
    options: RigOptions,
  ) {
    this.budget = { ...settings.budget, ...options.budget };
    this.failures = new ReservationFailures(scratch.db);
  }

  static async create(
    configuration: Configuration,
    settings: LabSettings,
    services: LabServices,
    label: string,
    options: RigOptions = {},
  ): Promise<Rig> {
    const name = scratchName(`lab_${label}`);
    // A small pool: several runs at once share one PostgreSQL (max_connections is often 100).
    const scratch = await createScratchDatabase(services.databaseUrl, name, { poolSize: 5 });
    try {
      const rig =
        configuration.transport === 'rabbitmq'
          ? new RabbitRig(configuration, settings, services, scratch, options, name)
          : new SqsRig(configuration, settings, services, scratch, options, name);
      await rig.faults.run(() => rig.prepare());
      return rig;
    } catch (err) {
      await scratch.drop().catch(() => {});
      throw err;
    }
  }

  /** Creates the transport's resources (called once, inside the rig's fault scope). */
  abstract prepare(): Promise<void>;

  get db(): PgDatabase {
    return this.scratch.db;
  }

  get journal() {
    return this.recorder.journal;
  }

  /** The scenario's clock starts now (call after setup). */
  begin(): void {
    this.t0 = Date.now();
  }

  mark(label: string, kind: TimelineKind = 'control'): void {
    this.marks.push({ at: Date.now(), kind, label });
  }

  /** Waits on a condition, for at most the run's wait budget. */
  waitFor<T>(
    check: () => Promise<T> | T,
    message: string,
    options: { timeoutMs?: number; intervalMs?: number } = {},
  ) {
    return waitFor(check, {
      timeoutMs: options.timeoutMs ?? this.settings.waitMs,
      intervalMs: options.intervalMs ?? 25,
      message,
    });
  }

  /**
   * Watches a condition for at most `forMs`: true as soon as it holds, false if it never did. For
   * stimuli that last a given time where one transport reacts and another does not.
   */
  async observe(check: () => Promise<boolean> | boolean, forMs: number): Promise<boolean> {
    const until = Date.now() + forMs;
    while (Date.now() < until) {
      if (await check()) return true;
      await sleep(25);
    }
    return check();
  }

  /** Journal lines of one message (optionally one step), since the scenario's start. */
  linesOf(messageId: string, step?: JournalLine['step']): JournalLine[] {
    return this.recorder.lines.filter(
      (l) => l.messageId === messageId && (!step || l.step === step) && l.at >= this.t0,
    );
  }

  waitForLine(
    messageId: string,
    step: Parameters<JournalRecorder['waitForLine']>[1],
    count = 1,
    timeoutMs = this.settings.waitMs,
  ) {
    return this.recorder.waitForLine(messageId, step, count, timeoutMs);
  }

  stock(sku: string, available: number) {
    return setStock(this.db, sku, available);
  }

  /** The orders HTTP API (place-order handler behind the local API Gateway emulation). */
  private async api(): Promise<string> {
    if (this.apiUrl) return this.apiUrl;
    const api = await startHttpApi(
      createPlaceOrderHandler({ orders: new OrderService({ db: this.db }), logger: log() }),
      { port: 0 },
    );
    this.closers.push(() => api.close());
    this.apiUrl = api.url;
    return api.url;
  }

  private async post(path: string, body?: unknown): Promise<Record<string, unknown>> {
    const res = await fetch(`${await this.api()}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-correlation-id': `lab-${this.name}` },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await res.json()) as Record<string, unknown>;
    if (res.status >= 300) throw new Error(`POST ${path} → ${res.status} ${JSON.stringify(json)}`);
    return json;
  }

  /** `POST /orders`: the order row and its outbox row in one COMMIT. */
  async placeOrder(sku: string, quantity: number): Promise<{ orderId: string; eventId: string }> {
    const r = await this.post('/orders', { sku, quantity });
    return { orderId: r.orderId as string, eventId: r.eventId as string };
  }

  /** `POST /orders/{id}/cancel`: `order.cancelled`, version 2. */
  async cancelOrder(orderId: string): Promise<{ eventId: string }> {
    const r = await this.post(`/orders/${orderId}/cancel`);
    return { eventId: r.eventId as string };
  }

  /** The unpublished envelopes in the outbox (oldest first), as the relay will publish them. */
  outboxEnvelopes(): Promise<Envelope[]> {
    return this.db.transaction(async (tx) =>
      (await new OutboxStore('outbox').claim(tx, 100_000)).map((r) => r.envelope),
    );
  }

  async unpublished(): Promise<number> {
    const { rows } = await this.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL',
    );
    return rows[0]?.n ?? 0;
  }

  /** The outbox relay on this transport (small row backoff, so a fixed route is seen quickly). */
  relay(publisher: Publisher = this.publisher()): OutboxRelay {
    return new OutboxRelay(
      { db: this.db, publisher, logger: log() },
      {
        table: 'outbox',
        batchSize: 100,
        maxAttempts: 10,
        retryBaseMs: 100,
        retryMaxMs: 400,
        readyTimeoutMs: 300,
      },
    );
  }

  /** Runs the relay until the outbox is empty. */
  async drainOutbox(publisher?: Publisher): Promise<void> {
    const relay = this.relay(publisher);
    const abort = new AbortController();
    const draining = relay.drain({
      budgetMs: this.settings.waitMs,
      idleWaitMs: 25,
      signal: abort.signal,
    });
    try {
      await this.waitFor(async () => (await this.unpublished()) === 0, 'outbox drained');
    } finally {
      abort.abort();
      await draining;
    }
  }

  abstract publisher(): Publisher;

  /** Publishes envelopes as the relay does (confirmed); throws if one is not confirmed. */
  async publish(...envelopes: Envelope[]): Promise<void> {
    const outcomes = await this.publisher().publish(envelopes);
    const failed = outcomes.find((o) => !o.ok);
    if (failed && !failed.ok) throw new Error(`publish failed: ${failed.reason} ${failed.error}`);
  }

  abstract publishRaw(messages: RawMessage[]): Promise<void>;

  useCase(db: SqlDatabase = this.db): ReserveInventory {
    return new ReserveInventory(
      { db, journal: this.journal, logger: log() },
      { budget: this.budget },
    );
  }

  abstract startConsumer(options?: ConsumerOptions): Promise<void>;

  abstract parkingLot(): ParkingLot;

  /** Removes the route to the consumer's queue (RabbitMQ: bindings; SQS: the queue itself). */
  abstract breakRoute(): Promise<void>;
  abstract restoreRoute(): Promise<void>;
  /** Removes the parking lot's route (RabbitMQ: its binding; SQS: the parking queue). */
  abstract breakParking(): Promise<void>;
  abstract restoreParking(): Promise<void>;
  /** A publisher reaching the broker through a proxy the scenario can cut. */
  abstract proxiedPublisher(): Promise<{ publisher: Publisher; proxy: TcpProxy }>;
  /** Messages in the consumer's queue that are held for dead lettering (RabbitMQ only). */
  async heldForDeadLettering(): Promise<number> {
    return 0;
  }

  /** A pool on the run's database through a proxy the scenario can cut. */
  async proxiedDb(options: { statementTimeoutMillis?: number } = {}) {
    const p = await proxiedDatabase(this.scratch.url, options);
    this.closers.push(() => p.close());
    return p;
  }

  get name(): string {
    return this.scratch.name;
  }

  async close(): Promise<void> {
    this.faults.disarm();
    for (const close of this.closers.reverse()) await close().catch(() => {});
    await this.scratch.drop().catch(() => {});
  }
}

class RabbitRig extends Rig {
  private vhost!: ScratchVhost;
  connection!: RabbitConnection;
  private settler!: RabbitSettler;

  constructor(
    configuration: Configuration,
    settings: LabSettings,
    services: LabServices,
    scratch: ScratchDatabase,
    options: RigOptions,
    private readonly vhostName: string,
  ) {
    super(configuration, settings, services, scratch, options);
  }

  async prepare(): Promise<void> {
    this.vhost = await createScratchVhost(
      this.services.managementUrl,
      this.services.amqpUrl,
      this.vhostName,
    );
    this.closers.push(() => this.vhost.delete());
    this.connection = new RabbitConnection({
      url: this.vhost.amqpUrl,
      connectionName: `lab-${this.vhostName}`,
      initialReconnectDelayMs: 50,
      maxReconnectDelayMs: 500,
    });
    this.closers.push(() => this.connection.close());
    await prepareInventoryTopology({
      channel: (fn) => this.connection.withChannel(fn),
      management: this.vhost.management,
      vhost: this.vhost.vhost,
      budget: this.budget,
      retention: DEFAULT_RETENTION,
      policy: { deliveryLimit: this.settings.deliveryLimit },
    });
    this.settler = new RabbitSettler(
      { connection: this.connection },
      { budget: this.budget, consumer: `inventory@lab-${this.configuration.id}` },
    );
  }

  publisher(connection = this.connection): Publisher {
    return new RabbitPublisher(
      { connection },
      { exchange: RABBITMQ_NAMES.ordersExchange, confirmTimeoutMs: 5_000, connectTimeoutMs: 1_000 },
    );
  }

  async publishRaw(messages: RawMessage[]): Promise<void> {
    await this.connection.withChannel((ch) => publishRawOrders(ch, messages));
  }

  async startConsumer(options: ConsumerOptions = {}): Promise<void> {
    const useCase = this.useCase(options.db);
    if (this.configuration.consumer === 'worker') {
      for (let i = 0; i < (options.concurrency ?? 1); i++) {
        const worker = new RabbitWorker(
          {
            connection: this.connection,
            settler: this.settler,
            process: (m) => useCase.process(m),
            journal: this.journal,
            logger: log(),
          },
          { queue: RABBITMQ_NAMES.inventoryQueue, reconnectBaseMs: 100, reconnectMaxMs: 1_000 },
        );
        await worker.start();
        this.closers.push(() => worker.stop());
      }
      return;
    }
    // Amazon MQ: one concurrent invocation per event source mapping, whatever `concurrency` says.
    const handler = createReserveInventoryRabbitHandler({
      process: (m) => useCase.process(m),
      settler: this.settler,
      logger: log(),
      journal: this.journal,
    });
    const trigger = new AmazonMqTrigger(
      {
        connection: this.connection,
        logger: log(),
        handler: async (event, context: Context) => {
          try {
            return await handler(event, context);
          } catch (err) {
            this.mark(
              `invocation failed, batch requeued: ${(err as Error).message}`,
              'failed-invocation',
            );
            throw err;
          }
        },
      },
      {
        queue: RABBITMQ_NAMES.inventoryQueue,
        vhost: this.vhost.vhost,
        batchSize: 10,
        batchWindowMs: this.settings.mqBatchWindowMs,
        functionTimeoutMs: this.settings.functionTimeoutMs,
      },
    );
    await trigger.start();
    this.closers.push(() => trigger.stop());
  }

  parkingLot(): ParkingLot {
    return rabbitParkingLot({ connection: this.connection, settler: this.settler });
  }

  private readonly routes = [
    [RABBITMQ_NAMES.inventoryQueue, RABBITMQ_NAMES.ordersExchange, 'order.created'],
    [RABBITMQ_NAMES.inventoryQueue, RABBITMQ_NAMES.ordersExchange, 'order.cancelled'],
    [RABBITMQ_NAMES.auditQueue, RABBITMQ_NAMES.ordersExchange, 'order.#'],
  ] as const;

  async breakRoute(): Promise<void> {
    await this.connection.withChannel(async (ch) => {
      for (const [q, ex, key] of this.routes) await ch.unbindQueue(q, ex, key);
    });
  }

  async restoreRoute(): Promise<void> {
    await this.connection.withChannel(async (ch) => {
      for (const [q, ex, key] of this.routes) await ch.bindQueue(q, ex, key);
    });
  }

  private readonly parkingBinding = [
    RETRY_NAMES.parkingQueue,
    RETRY_NAMES.parkingExchange,
    RETRY_NAMES.parkingRoutingKey,
  ] as const;

  async breakParking(): Promise<void> {
    await this.connection.withChannel((ch) => ch.unbindQueue(...this.parkingBinding));
  }

  /**
   * Binds parking again and re-applies inventory.orders' policy with a change: on RabbitMQ 3.10 a
   * held dead letter is otherwise retried only after 180 s (dead_letter_worker_publisher_confirm_timeout).
   */
  async restoreParking(): Promise<void> {
    await this.connection.withChannel((ch) => ch.bindQueue(...this.parkingBinding));
    const policies = buildPolicies(this.budget, DEFAULT_RETENTION, {
      deliveryLimit: this.settings.deliveryLimit + 1,
    }).filter((p) => p.name === RABBITMQ_NAMES.inventoryQueue);
    await applyPolicies(this.vhost.management, this.vhost.vhost, policies);
  }

  async proxiedPublisher(): Promise<{ publisher: Publisher; proxy: TcpProxy }> {
    const target = new URL(this.services.amqpUrl);
    const proxy = await new TcpProxy(target.hostname, Number(target.port || 5672)).start();
    const connection = new RabbitConnection({
      url: amqpUrlVia(this.services.amqpUrl, proxy.port, this.vhost.vhost),
      connectionName: `lab-relay-${this.vhostName}`,
      initialReconnectDelayMs: 50,
      maxReconnectDelayMs: 500,
    });
    this.closers.push(async () => {
      await connection.close();
      await proxy.close();
    });
    return { publisher: this.publisher(connection), proxy };
  }

  override async heldForDeadLettering(): Promise<number> {
    const q = await this.vhost.management.request<{ messages_dlx?: number }>(
      'GET',
      `/api/queues/${encodeURIComponent(this.vhost.vhost)}/${RABBITMQ_NAMES.inventoryQueue}`,
    );
    return q?.messages_dlx ?? 0;
  }
}

class SqsRig extends Rig {
  private client!: SQSClient;
  private queues!: Awaited<ReturnType<typeof ensureSqsQueues>>;
  private readonly fifo: boolean;

  constructor(
    configuration: Configuration,
    settings: LabSettings,
    services: LabServices,
    scratch: ScratchDatabase,
    options: RigOptions,
    private readonly prefix: string,
  ) {
    super(configuration, settings, services, scratch, options);
    this.fifo = configuration.fifo ?? false;
  }

  private ensureQueues() {
    return ensureSqsQueues(
      this.client,
      sqsQueueNames(`${this.prefix.replace(/_/g, '-')}-`, this.fifo),
      DEFAULT_RETENTION,
      {
        ...defaultSqsQueueSettings(this.budget),
        visibilityTimeoutSeconds: this.settings.visibilityTimeoutSeconds,
      },
    );
  }

  async prepare(): Promise<void> {
    this.client = createSqsClient({
      endpoint: this.services.sqsEndpoint,
      requestTimeoutMs: 5_000,
      maxAttempts: 1,
    });
    this.queues = await this.ensureQueues();
    this.closers.push(async () => {
      for (const url of [this.queues.sourceUrl, this.queues.parkingUrl]) {
        await this.client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
      }
      this.client.destroy();
    });
  }

  publisher(client = this.client): Publisher {
    return new SqsPublisher({ client }, { queueUrl: this.queues.sourceUrl, fifo: this.fifo });
  }

  async publishRaw(messages: RawMessage[]): Promise<void> {
    const str = (v: string): MessageAttributeValue => ({ DataType: 'String', StringValue: v });
    const out = await this.client.send(
      new SendMessageBatchCommand({
        QueueUrl: this.queues.sourceUrl,
        Entries: messages.map((m, k) => ({
          Id: String(k),
          MessageBody: m.body.toString(),
          MessageAttributes: {
            ...(m.messageId ? { event_id: str(m.messageId) } : {}),
            ...(m.type ? { event_type: str(m.type) } : {}),
            ...(m.schemaVersion ? { schema_version: str(m.schemaVersion) } : {}),
          },
          ...(this.fifo
            ? { MessageGroupId: 'raw', MessageDeduplicationId: `${Date.now()}-${k}` }
            : {}),
        })),
      }),
    );
    if (out.Failed?.length) throw new Error(`send failed: ${JSON.stringify(out.Failed)}`);
  }

  async startConsumer(options: ConsumerOptions = {}): Promise<void> {
    const useCase = this.useCase(options.db);
    const handler = createReserveInventorySqsHandler({
      process: (m) => useCase.process(m),
      settler: new SqsSettler(
        { client: this.client },
        {
          sourceUrl: this.queues.sourceUrl,
          parkingUrl: this.queues.parkingUrl,
          mode: this.configuration.sqsMode ?? 'visibility',
          budget: this.budget,
          consumer: `inventory@lab-${this.configuration.id}`,
          fifo: this.fifo,
        },
      ),
      logger: log(),
      journal: this.journal,
    });
    const pollClient = createSqsClient({
      endpoint: this.services.sqsEndpoint,
      requestTimeoutMs: 25_000,
      maxAttempts: 1,
    });
    const trigger = new SqsTrigger(
      {
        client: pollClient,
        logger: log(),
        handler: async (event, context) => {
          try {
            return await handler(event, context);
          } catch (err) {
            this.mark(
              `invocation failed, batch left in the queue: ${(err as Error).message}`,
              'failed-invocation',
            );
            throw err;
          }
        },
      },
      {
        queueUrl: this.queues.sourceUrl,
        queueArn: this.queues.sourceArn,
        batchSize: 10,
        maxConcurrency: options.concurrency ?? 2,
        functionTimeoutMs: this.settings.functionTimeoutMs,
      },
    );
    await trigger.start();
    this.closers.push(async () => {
      await trigger.stop();
      pollClient.destroy();
    });
  }

  parkingLot(): ParkingLot {
    return sqsParkingLot({
      client: this.client,
      sourceUrl: this.queues.sourceUrl,
      parkingUrl: this.queues.parkingUrl,
    });
  }

  async breakRoute(): Promise<void> {
    await this.client.send(new DeleteQueueCommand({ QueueUrl: this.queues.sourceUrl }));
  }

  async restoreRoute(): Promise<void> {
    this.queues = await this.ensureQueues();
  }

  async breakParking(): Promise<void> {
    await this.client.send(new DeleteQueueCommand({ QueueUrl: this.queues.parkingUrl }));
  }

  async restoreParking(): Promise<void> {
    this.queues = await this.ensureQueues();
  }

  async proxiedPublisher(): Promise<{ publisher: Publisher; proxy: TcpProxy }> {
    const target = new URL(this.services.sqsEndpoint);
    const proxy = await new TcpProxy(target.hostname, Number(target.port)).start();
    const client = createSqsClient({
      endpoint: `http://127.0.0.1:${proxy.port}`,
      requestTimeoutMs: 500,
      maxAttempts: 1,
    });
    this.closers.push(async () => {
      client.destroy();
      await proxy.close();
    });
    return { publisher: this.publisher(client), proxy };
  }
}
