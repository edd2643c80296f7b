import { randomUUID } from 'node:crypto';
import { type ConsumerSettings, startConsumer } from '../../devkit/consumers.js';
import { JournalRecorder } from '../../devkit/journalRecorder.js';
import { publishRaw, type RawMessage } from '../../devkit/rawMessages.js';
import {
  createScratch,
  proxiedDatabase,
  type ScratchDatabase,
  type ScratchEnvironment,
} from '../../devkit/scratch.js';
import type { TcpProxy } from '../../devkit/TcpProxy.js';
import type { ScratchVhost } from '../../devkit/transports/types.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import type { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type {
  Backend,
  MessageHandler,
  ParkedEntry,
  RunningConsumer,
  SqlDatabase,
} from '../../shared/index.js';
import {
  DEFAULT_RETENTION,
  type Envelope,
  newEnvelope,
  type RetryBudget,
} from '../../shared/index.js';
import { INVENTORY_PARK_NOTICES } from '../../shared/inventory/quarantine.js';
import { ReserveInventory } from '../../shared/inventory/ReserveInventory.js';
import { setStock } from '../../shared/inventory/stock.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import type {
  RabbitMqBackend,
  RabbitMqBackendConfig,
} from '../../shared/transport/rabbitmq/index.js';
import { inboxRows, stockOf } from './db.js';
import { SERVICES } from './services.js';

/** Who parks in the rigs' diagnoses. */
export const RIG_CONSUMER = 'inventory@test';

/** How a consumer rig starts its transport's reserve consumer. */
export interface RigConsumerOptions {
  db?: SqlDatabase;
  /** Pollers at once, where a trigger emulation polls (SQS). */
  concurrency?: number;
  /** How long a trigger gathers a batch. */
  batchWindowMs?: number;
}

/**
 * What every consumer-side rig shares: a scratch environment of its own (database, and a
 * vhost or a queue prefix), a backend prepared on it, a journal recorder, the inventory use case,
 * and readers of the outcome (reservation, stock, inbox, parking lot). Each transport's rig
 * says how its reserve consumer runs (`start`), how a retry comes back, and how the CLI reaches it.
 */
export abstract class ConsumerRig<B extends Backend = Backend> extends JournalRecorder {
  protected readonly closers: (() => Promise<unknown>)[] = [];

  protected constructor(
    readonly scratch: ScratchEnvironment,
    readonly backend: B,
    readonly budget: RetryBudget,
  ) {
    super();
  }

  /** The rig's own database (name, url, db). */
  get t(): ScratchDatabase {
    return this.scratch.database;
  }

  /** Starts the reserve consumer as the transport runs it when deployed (stopped at close). */
  abstract start(options?: RigConsumerOptions): Promise<RunningConsumer>;

  /**
   * How a retry comes back: as a new copy, the original acknowledged once the copy is confirmed
   * (RabbitMQ's retry queues, SQS's resend mode), or as the same message delivered again, flagged
   * redelivered (SQS's visibility mode).
   */
  abstract readonly retryComesBackAs: 'copy' | 'redelivery';

  /** What `bin/cli.ts` needs in its environment to reach this rig's broker. */
  abstract cliEnv(): Record<string, string>;

  /** What an `npm run dev` consumer needs to consume this rig's queue with its database. */
  devEnv(): Record<string, string> {
    // both services' schemas are in the rig's one database
    return { DATABASE_URL: this.t.url, INVENTORY_DATABASE_URL: this.t.url, ...this.cliEnv() };
  }

  /** Copies of order events a tap kept besides the consumer's queue (RabbitMQ: audit.orders). */
  tapCopies?(): Promise<number>;

  /** A database client through a TCP proxy the test can cut ("database down"). */
  async proxiedDb(): Promise<{ db: PgDatabase; proxy: TcpProxy }> {
    const p = await proxiedDatabase(this.t.url);
    this.closers.push(() => p.close());
    return p;
  }

  useCase(db: SqlDatabase = this.t.db, budget = this.budget): ReserveInventory {
    return new ReserveInventory({ db, journal: this.journal }, { budget });
  }

  /** The use case as the consumer driver calls it. */
  handler(db: SqlDatabase = this.t.db): MessageHandler {
    const useCase = this.useCase(db);
    return (messages) => useCase.process(messages);
  }

  /**
   * Starts a consumer of the backend (stopped at close), announcing parked order events to the
   * results destination as the deployed reserve functions do.
   */
  protected async consumer(db: SqlDatabase | undefined, settings: ConsumerSettings) {
    const running = await startConsumer(this.backend, this.handler(db), {
      journal: this.journal,
      notices: INVENTORY_PARK_NOTICES,
      ...settings,
    });
    this.closers.push(() => running.stop());
    return running;
  }

  stock(sku: string, available: number) {
    return setStock(this.t.db, sku, available);
  }

  orderCreated(sku: string, quantity: number, patch: Partial<Envelope> = {}): Envelope {
    const orderId = randomUUID();
    return {
      ...newEnvelope({
        type: 'order.created',
        aggregate: { type: 'order', id: orderId, version: 1 },
        data: { orderId, sku, quantity },
        correlationId: `corr-${orderId.slice(0, 8)}`,
        producer: 'order-service',
      }),
      ...patch,
    };
  }

  orderCancelled(created: Envelope): Envelope {
    return newEnvelope({
      type: 'order.cancelled',
      aggregate: { type: 'order', id: created.aggregate.id, version: 2 },
      data: created.data,
      correlationId: created.correlation_id,
      producer: 'order-service',
    });
  }

  /** Publishes exactly as the relay does (the backend's publisher of the `outbox` stream). */
  async publish(...envelopes: Envelope[]): Promise<void> {
    const outcomes = await this.backend.publisher('outbox').publish(envelopes);
    const failed = outcomes.filter((o) => !o.ok);
    if (failed.length > 0) throw new Error(`publish failed: ${JSON.stringify(failed)}`);
  }

  /** Publishes messages as they are (poison messages, missing ids). */
  publishRaw(messages: RawMessage[]): Promise<void> {
    return publishRaw(this.backend, messages);
  }

  async parkedCount(): Promise<number> {
    return (await this.backend.inspect()).parked;
  }

  parked(limit = 100): Promise<ParkedEntry[]> {
    return this.backend.parkingLot().list(limit);
  }

  async reservation(orderId: string) {
    const { rows } = await this.t.db.query<{
      status: string;
      order_version: number;
      reason: string | null;
    }>('SELECT status, order_version, reason FROM reservations WHERE order_id = $1', [orderId]);
    return rows[0];
  }

  stockOf(sku: string) {
    return stockOf(this.t.db, sku);
  }

  inboxRows(messageId: string): Promise<number> {
    return inboxRows(this.t.db, messageId);
  }

  async close(): Promise<void> {
    for (const c of this.closers.reverse()) await c().catch(() => {});
    await this.scratch.close();
  }
}

/** A RabbitMQ worker as the rig starts it: its stats, and its channel reconnects. */
export type RigWorker = RunningConsumer & { readonly reconnects: number };

/**
 * The RabbitMQ consumer-side test rig: its own database and vhost with the full topology and
 * policies (`backend.prepare()`), a journal recorder, and helpers to publish events as the relay
 * would and to read the outcome.
 */
export class InventoryRig extends ConsumerRig<RabbitMqBackend> {
  static async create(
    label: string,
    budget: RetryBudget = TEST_RETRY_BUDGET,
    /** Backend settings beyond the rig's (e.g. `onParkRefused`). */
    overrides: Partial<RabbitMqBackendConfig> = {},
  ): Promise<InventoryRig> {
    const scratch = await createScratch(SERVICES, label);
    try {
      const backend = scratch.backend(
        'rabbitmq',
        {
          budget,
          retention: DEFAULT_RETENTION,
          consumer: RIG_CONSUMER,
          topology: PIPELINE_TOPOLOGY,
        },
        { reconnect: { baseMs: 50, maxMs: 500 }, ...overrides },
      );
      await backend.prepare();
      return new InventoryRig(scratch, backend, budget);
    } catch (err) {
      await scratch.close();
      throw err;
    }
  }

  get vhost(): ScratchVhost {
    return this.scratch.vhost as ScratchVhost;
  }

  readonly retryComesBackAs = 'copy';

  start(options: RigConsumerOptions = {}): Promise<RunningConsumer> {
    return this.worker(options.db ? { db: options.db } : {});
  }

  cliEnv(): Record<string, string> {
    return { AMQP_URL: this.vhost.amqpUrl, RABBITMQ_MANAGEMENT_URL: SERVICES.managementUrl };
  }

  override tapCopies(): Promise<number> {
    return this.depth(RABBITMQ_NAMES.auditQueue);
  }

  /** Starts a worker-mode consumer (stopped at close). */
  async worker(
    options: {
      db?: SqlDatabase;
      prefetch?: number;
      maxBatch?: number;
      reconnectBaseMs?: number;
      reconnectMaxMs?: number;
    } = {},
  ): Promise<RigWorker> {
    const { db, ...settings } = options;
    const worker = await this.consumer(db, {
      mode: 'worker',
      reconnectBaseMs: 100,
      reconnectMaxMs: 1_000,
      ...settings,
    });
    // The RabbitMQ backend's workers count their channel reconnects next to the stats.
    if (typeof (worker as Partial<RigWorker>).reconnects !== 'number') {
      throw new Error('the RabbitMQ worker does not report its reconnects');
    }
    return worker as RigWorker;
  }

  /** Starts the reserve function behind the Amazon MQ trigger emulation (stopped at close). */
  trigger(
    options: {
      db?: SqlDatabase;
      batchSize?: number;
      batchWindowMs?: number;
      functionTimeoutMs?: number;
    } = {},
  ): Promise<RunningConsumer> {
    const { db, ...settings } = options;
    return this.consumer(db, { mode: 'lambda', batchSize: 10, batchWindowMs: 300, ...settings });
  }

  /** Messages ready in a queue of the rig's vhost. */
  depth(queue: string): Promise<number> {
    return this.backend.withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount);
  }
}
