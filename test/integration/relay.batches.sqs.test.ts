import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TcpProxy } from '../../devkit/TcpProxy.js';
import type { Publisher } from '../../shared/index.js';
import { newEnvelope, OutboxRelay, OutboxStore } from '../../shared/index.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import {
  createSqsRig,
  receiveAll,
  SQS_FEATURES,
  SQS_SERVERS,
  type SqsRig,
} from '../helpers/sqs.js';

const options = {
  table: 'outbox' as const,
  batchSize: 100,
  maxAttempts: 5,
  retryBaseMs: 50,
  retryMaxMs: 200,
};

/**
 * What only SQS has: a batch send that fails entry by entry (SendMessageBatch), FIFO group and
 * deduplication ids, and an HTTP request lost with its whole batch. The relay tests every
 * transport runs are in relay.test.ts.
 */
describe.each(SQS_SERVERS)('outbox relay → SQS ($name): batches', (server) => {
  let t: TestDatabase;
  let orders: OrderService;
  const rigs: SqsRig[] = [];
  /** Queues of this test's own, through the SQS backend (closed with the file). */
  const rig = async (
    label: string,
    options?: Parameters<typeof createSqsRig>[2],
  ): Promise<SqsRig> => {
    const f = await createSqsRig(server, label, options);
    rigs.push(f);
    return f;
  };
  beforeAll(async () => {
    t = await createTestDatabase(`relay_sqs_batches_${server.name}`);
    orders = new OrderService({ db: t.db });
  });
  afterAll(async () => {
    for (const f of rigs) await f.close();
    await t?.drop();
  });
  beforeEach(() => t.db.query('TRUNCATE orders, outbox'));

  const unpublished = async () =>
    Number(
      (
        await t.db.query<{ n: string }>(
          'SELECT count(*) AS n FROM outbox WHERE published_at IS NULL',
        )
      ).rows[0]?.n,
    );

  it('endpoint lost in the middle of a round: those rows get an attempt and a backoff, then are published', async () => {
    const proxy = await new TcpProxy('127.0.0.1', Number(new URL(server.endpoint).port)).start();
    const via = `http://127.0.0.1:${proxy.port}`;
    const f = await rig('relay_sqs_mid', { endpoint: via, requestTimeoutMs: 500 });
    const inner = f.backend.publisher('outbox');
    // the connection drops after the relay checked it, before the batch is sent
    const dropping: Publisher = {
      ready: (ms) => inner.ready(ms),
      close: () => inner.close(),
      publish: async (envelopes) => {
        proxy.cut();
        return inner.publish(envelopes);
      },
    };
    try {
      for (let i = 0; i < 12; i++)
        await orders.place({ sku: 'sku-1', quantity: 1, correlationId: 'mid' });
      const relay = new OutboxRelay({ db: t.db, publisher: dropping }, options);
      expect(await relay.runOnce()).toMatchObject({ claimed: 12, published: 0, failed: 12 });
      const { rows } = await t.db.query<{ attempts: number; last_error: string }>(
        'SELECT attempts, last_error FROM outbox',
      );
      expect(rows.map((r) => r.attempts)).toEqual(Array(12).fill(1));
      expect(rows[0]?.last_error).toMatch(/^connection: /);

      proxy.restore();
      await t.db.query('UPDATE outbox SET next_attempt_at = now()');
      const healthy = new OutboxRelay({ db: t.db, publisher: inner }, options);
      expect(await healthy.runOnce()).toMatchObject({ published: 12 });
      expect(await unpublished()).toBe(0);
    } finally {
      await proxy.close();
    }
  });

  it.skipIf(!SQS_FEATURES[server.name].rejectsInvalidCharacters)(
    'a partial SendMessageBatch failure marks only the successful entries',
    async () => {
      const f = await rig('relay_sqs_partial');
      const store = new OutboxStore('outbox');
      const envelopes = Array.from({ length: 12 }, (_, i) =>
        newEnvelope({
          type: 'order.created',
          aggregate: { type: 'order', id: randomUUID(), version: 1 },
          // SQS refuses U+FFFF in a body; RabbitMQ would not care
          data: { note: i === 3 || i === 11 ? 'bad \uFFFF' : 'fine' },
          correlationId: 'partial',
          producer: 'test',
        }),
      );
      await t.db.transaction(async (tx) => {
        for (const e of envelopes) await store.append(tx, e);
      });
      const relay = new OutboxRelay(
        { db: t.db, publisher: f.backend.publisher('outbox') },
        options,
      );
      expect(await relay.runOnce()).toMatchObject({ claimed: 12, published: 10, failed: 2 });
      const { rows } = await t.db.query<{ id: string; last_error: string }>(
        'SELECT id, last_error FROM outbox WHERE published_at IS NULL ORDER BY id',
      );
      expect(rows.map((r) => r.id).sort()).toEqual([envelopes[3]?.id, envelopes[11]?.id].sort());
      expect(rows[0]?.last_error).toMatch(/^nacked: InvalidMessageContents/);
    },
  );

  it('FIFO: group id = aggregate id, deduplication id = event id', async () => {
    const f = await rig('relay_sqs_fifo', { fifo: true });
    const { orderId, eventId } = await orders.place({
      sku: 'sku-1',
      quantity: 1,
      correlationId: 'fifo',
    });
    await orders.cancel(orderId, 'fifo');
    const relay = new OutboxRelay(
      {
        db: t.db,
        publisher: f.backend.publisher('outbox'),
      },
      options,
    );
    expect(await relay.runOnce()).toMatchObject({ published: 2 });
    const got = await receiveAll(f.client, f.queues.sourceUrl, (m) => m.length >= 2);
    expect(got.map((m) => m.Attributes?.MessageGroupId)).toEqual([orderId, orderId]);
    expect(got[0]?.Attributes?.MessageDeduplicationId).toBe(eventId);
    expect(got.map((m) => JSON.parse(m.Body ?? '{}').aggregate.version)).toEqual([1, 2]);
  });
});
