import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { JournalRecorder } from '../../devkit/journalRecorder.js';
import type { TcpProxy } from '../../devkit/tcpProxy.js';
import { SqsTrigger, type SqsTriggerOptions } from '../../devkit/triggers/sqsTrigger.js';
import { createReserveInventorySqsHandler } from '../../functions/reserve-inventory-sqs/handler.js';
import { type RetryBudget, TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import type { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import { type Envelope, encodeEnvelope } from '../../shared/envelope/envelope.js';
import { ReserveInventory } from '../../shared/inventory/ReserveInventory.js';
import { setStock } from '../../shared/inventory/stock.js';
import { createLogger } from '../../shared/logger.js';
import { createSqsClient } from '../../shared/transport/sqs/client.js';
import { envelopeAttributes } from '../../shared/transport/sqs/SqsPublisher.js';
import { type SqsRetryMode, SqsSettler } from '../../shared/transport/sqs/SqsSettler.js';
import type { SqsServer } from '../globalSetup.js';
import {
  createTestDatabase,
  inboxRows,
  proxiedDatabase,
  stockOf,
  type TestDatabase,
} from './db.js';
import { createSqsFixture, type SqsFixture } from './sqs.js';

/** The SQS twin of InventoryBench: own database, own queues (by prefix) on a shared server. */
export class SqsInventoryBench extends JournalRecorder {
  private readonly triggers: SqsTrigger[] = [];
  private readonly clients: SQSClient[] = [];
  private readonly closers: (() => Promise<void>)[] = [];

  private constructor(
    readonly t: TestDatabase,
    readonly f: SqsFixture,
    readonly budget: RetryBudget,
    readonly mode: SqsRetryMode,
  ) {
    super();
  }

  static async create(
    server: SqsServer,
    label: string,
    options: { mode?: SqsRetryMode; fifo?: boolean; budget?: RetryBudget } = {},
  ): Promise<SqsInventoryBench> {
    const budget = options.budget ?? TEST_RETRY_BUDGET;
    const [t, f] = await Promise.all([
      createTestDatabase(label),
      createSqsFixture(server, label, {
        fifo: options.fifo ?? false,
        budget,
        visibilityTimeoutSeconds: 6,
      }),
    ]);
    return new SqsInventoryBench(t, f, budget, options.mode ?? 'visibility');
  }

  /** A database client through a proxy the test can cut; closed with the bench. */
  async proxiedDb(): Promise<{ db: PgDatabase; proxy: TcpProxy }> {
    const p = await proxiedDatabase(this.t.url);
    this.closers.push(() => p.close());
    return p;
  }

  settler(fifo = false): SqsSettler {
    return new SqsSettler(
      { client: this.f.client },
      {
        sourceUrl: this.f.queues.sourceUrl,
        parkingUrl: this.f.queues.parkingUrl,
        mode: this.mode,
        budget: this.budget,
        consumer: 'inventory@test',
        fifo,
      },
    );
  }

  /** Starts the handler behind the SQS trigger emulation (stopped at close). */
  async trigger(options: { db?: PgDatabase; fifo?: boolean } & Partial<SqsTriggerOptions> = {}) {
    const useCase = new ReserveInventory(
      { db: options.db ?? this.t.db, journal: this.journal },
      { budget: this.budget },
    );
    const handler = createReserveInventorySqsHandler({
      process: (m) => useCase.process(m),
      settler: this.settler(options.fifo),
      logger: createLogger('reserve-inventory-sqs-test'),
      journal: this.journal,
    });
    const pollClient = createSqsClient({
      endpoint: this.f.endpoint,
      requestTimeoutMs: 25_000,
      maxAttempts: 1,
    });
    this.clients.push(pollClient);
    const trigger = new SqsTrigger(
      { client: pollClient, handler },
      {
        queueUrl: this.f.queues.sourceUrl,
        queueArn: this.f.queues.sourceArn,
        batchSize: 10,
        maxConcurrency: 2,
        functionTimeoutMs: 1_000,
        ...options,
      },
    );
    await trigger.start();
    this.triggers.push(trigger);
    return trigger;
  }

  stock(sku: string, available: number) {
    return setStock(this.t.db, sku, available);
  }

  /** Sends as the relay does: body = envelope, identity in attributes. */
  async send(...envelopes: Envelope[]): Promise<void> {
    for (let i = 0; i < envelopes.length; i += 10) {
      const out = await this.f.client.send(
        new SendMessageBatchCommand({
          QueueUrl: this.f.queues.sourceUrl,
          Entries: envelopes.slice(i, i + 10).map((e, k) => ({
            Id: String(k),
            MessageBody: encodeEnvelope(e).toString(),
            MessageAttributes: envelopeAttributes(e),
            ...(this.f.fifo
              ? {
                  MessageGroupId: e.aggregate.id,
                  MessageDeduplicationId: `${e.id}-${Date.now()}-${k}`,
                }
              : {}),
          })),
        }),
      );
      if (out.Failed?.length) throw new Error(`send failed: ${JSON.stringify(out.Failed)}`);
    }
  }

  async sendRaw(
    messages: { body: string; eventId?: string; type?: string; schemaVersion?: string }[],
  ): Promise<void> {
    await this.f.client.send(
      new SendMessageBatchCommand({
        QueueUrl: this.f.queues.sourceUrl,
        Entries: messages.map((m, k) => ({
          Id: String(k),
          MessageBody: m.body,
          MessageAttributes: {
            ...(m.eventId ? { event_id: { DataType: 'String', StringValue: m.eventId } } : {}),
            ...(m.type ? { event_type: { DataType: 'String', StringValue: m.type } } : {}),
            ...(m.schemaVersion
              ? { schema_version: { DataType: 'String', StringValue: m.schemaVersion } }
              : {}),
          },
        })),
      }),
    );
  }

  stockOf(sku: string) {
    return stockOf(this.t.db, sku);
  }

  inboxRows(messageId: string): Promise<number> {
    return inboxRows(this.t.db, messageId);
  }

  async close(): Promise<void> {
    for (const tr of this.triggers) await tr.stop();
    for (const c of this.clients) c.destroy();
    for (const close of this.closers) await close();
    this.f.client.destroy();
    await this.t.drop();
  }
}
