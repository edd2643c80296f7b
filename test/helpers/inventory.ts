import { randomUUID } from 'node:crypto';
import amqp, { type ChannelModel } from 'amqplib';
import { JournalRecorder } from '../../devkit/journalRecorder.js';
import type { TcpProxy } from '../../devkit/tcpProxy.js';
import { publishRawOrders, type RawMessage } from '../../lab/rig.js';
import {
  DEFAULT_RETENTION,
  type RetryBudget,
  TEST_RETRY_BUDGET,
} from '../../shared/config/budget.js';
import { RABBITMQ_NAMES } from '../../shared/config/constants.js';
import type { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type { SqlDatabase } from '../../shared/db/types.js';
import { type Envelope, encodeEnvelope, newEnvelope } from '../../shared/envelope/envelope.js';
import { ReserveInventory } from '../../shared/inventory/ReserveInventory.js';
import { setStock } from '../../shared/inventory/stock.js';
import { RabbitConnection } from '../../shared/transport/rabbitmq/RabbitConnection.js';
import { RabbitSettler } from '../../shared/transport/rabbitmq/RabbitSettler.js';
import {
  RabbitWorker,
  type RabbitWorkerOptions,
} from '../../shared/transport/rabbitmq/RabbitWorker.js';
import { prepareInventoryTopology, RETRY_NAMES } from '../../shared/transport/rabbitmq/topology.js';
import {
  createTestDatabase,
  inboxRows,
  proxiedDatabase,
  stockOf,
  type TestDatabase,
} from './db.js';
import { createTestVhost, type TestVhost } from './rabbit.js';

/**
 * A consumer-side test bench: its own database and vhost with the full topology and policies, a
 * journal recorder, and helpers to publish events as the relay would and to read the outcome.
 */
export class InventoryBench extends JournalRecorder {
  private readonly closers: (() => Promise<unknown>)[] = [];
  assert!: ChannelModel;
  connection!: RabbitConnection;

  private constructor(
    readonly t: TestDatabase,
    readonly vhost: TestVhost,
    readonly budget: RetryBudget,
  ) {
    super();
  }

  static async create(
    label: string,
    budget: RetryBudget = TEST_RETRY_BUDGET,
  ): Promise<InventoryBench> {
    const [t, vhost] = await Promise.all([createTestDatabase(label), createTestVhost(label)]);
    const bench = new InventoryBench(t, vhost, budget);
    bench.connection = new RabbitConnection({
      url: vhost.amqpUrl,
      initialReconnectDelayMs: 50,
      maxReconnectDelayMs: 500,
    });
    await prepareInventoryTopology({
      channel: (fn) => bench.connection.withChannel(fn),
      management: vhost.management,
      vhost: vhost.vhost,
      budget,
      retention: DEFAULT_RETENTION,
    });
    bench.assert = await amqp.connect(vhost.amqpUrl);
    return bench;
  }

  /** A database client through a TCP proxy the test can cut ("database down"). */
  async proxiedDb(): Promise<{ db: PgDatabase; proxy: TcpProxy }> {
    const p = await proxiedDatabase(this.t.url);
    this.closers.push(() => p.close());
    return p;
  }

  useCase(db: SqlDatabase = this.t.db, budget = this.budget): ReserveInventory {
    return new ReserveInventory({ db, journal: this.journal }, { budget });
  }

  settler(connection = this.connection): RabbitSettler {
    return new RabbitSettler({ connection }, { budget: this.budget, consumer: 'inventory@test' });
  }

  /** Starts a worker-mode consumer (stopped at close). */
  async worker(
    options: {
      db?: SqlDatabase;
      connection?: RabbitConnection;
    } & Partial<RabbitWorkerOptions> = {},
  ) {
    const connection = options.connection ?? this.connection;
    const useCase = this.useCase(options.db ?? this.t.db);
    const worker = new RabbitWorker(
      {
        connection,
        settler: this.settler(connection),
        process: (m) => useCase.process(m),
        journal: this.journal,
      },
      {
        queue: RABBITMQ_NAMES.inventoryQueue,
        reconnectBaseMs: 100,
        reconnectMaxMs: 1_000,
        ...options,
      },
    );
    await worker.start();
    this.closers.push(() => worker.stop());
    return worker;
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

  /** Publishes to the `orders` exchange exactly as the relay does (confirmed). */
  async publish(...envelopes: Envelope[]): Promise<void> {
    await this.publishRaw(
      envelopes.map((e) => ({
        body: encodeEnvelope(e),
        messageId: e.id,
        type: e.type,
        schemaVersion: e.schema_version,
      })),
    );
  }

  async publishRaw(messages: RawMessage[]): Promise<void> {
    const ch = await this.assert.createConfirmChannel();
    try {
      await publishRawOrders(ch, messages);
    } finally {
      await ch.close();
    }
  }

  async depth(queue: string): Promise<number> {
    const ch = await this.assert.createChannel();
    try {
      return (await ch.checkQueue(queue)).messageCount;
    } finally {
      await ch.close().catch(() => {});
    }
  }

  parkedCount() {
    return this.depth(RETRY_NAMES.parkingQueue);
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
    await this.connection?.close();
    await this.assert?.close().catch(() => {});
    await Promise.all([this.t.drop(), this.vhost.delete()]);
  }
}
