import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TcpProxy } from '../../devkit/tcpProxy.js';
import { waitFor } from '../../devkit/waitFor.js';
import { newEnvelope } from '../../shared/envelope/envelope.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { OutboxRelay } from '../../shared/outbox/OutboxRelay.js';
import { OutboxStore } from '../../shared/outbox/OutboxStore.js';
import type { Publisher } from '../../shared/port/types.js';
import { SQS_ATTRIBUTES, sqsBackend } from '../../shared/transport/sqs/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import {
  createSqsFixture,
  receiveAll,
  SQS_FEATURES,
  SQS_SERVERS,
  type SqsFixture,
} from '../helpers/sqs.js';

const options = {
  table: 'outbox' as const,
  batchSize: 100,
  maxAttempts: 5,
  retryBaseMs: 50,
  retryMaxMs: 200,
};

describe.each(SQS_SERVERS)('outbox relay → SQS ($name)', (server) => {
  let t: TestDatabase;
  let orders: OrderService;
  const fixtures: SqsFixture[] = [];
  /** Queues of this test's own, through the SQS backend (closed with the file). */
  const fixture = async (
    label: string,
    options?: Parameters<typeof createSqsFixture>[2],
  ): Promise<SqsFixture> => {
    const f = await createSqsFixture(server, label, options);
    fixtures.push(f);
    return f;
  };
  beforeAll(async () => {
    t = await createTestDatabase(`relay_sqs_${server.name}`);
    orders = new OrderService({ db: t.db });
  });
  afterAll(async () => {
    for (const f of fixtures) await f.close();
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

  it('publishes with SendMessageBatch; the envelope id, type, schema version and correlation id travel as attributes', async () => {
    const f = await fixture('relay_sqs_basic');
    const placed: { eventId: string }[] = [];
    for (let i = 0; i < 25; i++)
      placed.push(await orders.place({ sku: 'sku-1', quantity: 1, correlationId: `c-${i}` }));
    const relay = new OutboxRelay({ db: t.db, publisher: f.backend.publisher('outbox') }, options);

    expect(await relay.runOnce()).toMatchObject({ claimed: 25, published: 25, failed: 0 });
    expect(await unpublished()).toBe(0);
    const got = await receiveAll(f.client, f.queues.sourceUrl, (m) => m.length >= 25);
    const first = got.find(
      (m) => m.MessageAttributes?.[SQS_ATTRIBUTES.eventId]?.StringValue === placed[0]?.eventId,
    );
    expect(first?.MessageAttributes?.[SQS_ATTRIBUTES.eventType]?.StringValue).toBe('order.created');
    expect(first?.MessageAttributes?.[SQS_ATTRIBUTES.schemaVersion]?.StringValue).toBe('1.0');
    expect(first?.MessageAttributes?.[SQS_ATTRIBUTES.correlationId]?.StringValue).toBe('c-0');
    expect(JSON.parse(first?.Body ?? '{}')).toMatchObject({
      id: placed[0]?.eventId,
      type: 'order.created',
    });
    expect(
      new Set(got.map((m) => m.MessageAttributes?.[SQS_ATTRIBUTES.eventId]?.StringValue)),
    ).toEqual(new Set(placed.map((p) => p.eventId)));
  });

  it('endpoint down: rows stay unpublished (no attempt charged while unreachable); all published after it returns', async () => {
    const proxy = await new TcpProxy('127.0.0.1', Number(new URL(server.endpoint).port)).start();
    const via = `http://127.0.0.1:${proxy.port}`;
    const f = await fixture('relay_sqs_down', { endpoint: via, requestTimeoutMs: 500 });
    const relay = new OutboxRelay(
      { db: t.db, publisher: f.backend.publisher('outbox') },
      { ...options, readyTimeoutMs: 300 },
    );
    const abort = new AbortController();
    try {
      proxy.cut();
      const draining = relay.drain({ budgetMs: 60_000, idleWaitMs: 20, signal: abort.signal });
      const ids: string[] = [];
      for (let i = 0; i < 50; i++)
        ids.push(
          (await orders.place({ sku: 'sku-1', quantity: 1, correlationId: 'down' })).eventId,
        );
      await waitFor(() => proxy.refused >= 2, { message: 'relay kept trying' });
      expect(await unpublished()).toBe(50);
      const { rows } = await t.db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM outbox WHERE attempts > 0',
      );
      expect(rows[0]?.n).toBe(0);

      proxy.restore();
      await waitFor(async () => (await unpublished()) === 0, {
        timeoutMs: 20_000,
        message: 'outbox drained',
      });
      abort.abort();
      await draining;
      const got = await receiveAll(f.client, f.queues.sourceUrl, (m) => m.length >= 50);
      expect(
        new Set(got.map((m) => m.MessageAttributes?.[SQS_ATTRIBUTES.eventId]?.StringValue)),
      ).toEqual(new Set(ids));
    } finally {
      abort.abort();
      await proxy.close();
    }
  });

  it('endpoint lost in the middle of a round: those rows get an attempt and a backoff, then are published', async () => {
    const proxy = await new TcpProxy('127.0.0.1', Number(new URL(server.endpoint).port)).start();
    const via = `http://127.0.0.1:${proxy.port}`;
    const f = await fixture('relay_sqs_mid', { endpoint: via, requestTimeoutMs: 500 });
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
      const f = await fixture('relay_sqs_partial');
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

  it('a missing queue fails the batch as unroutable', async () => {
    const f = await fixture('relay_sqs_missing');
    await orders.place({ sku: 'sku-1', quantity: 1, correlationId: 'missing' });
    // the backend as a deployed function configures it, with a source queue URL that does not exist
    const missing = sqsBackend({
      ...f.backend.config,
      queueUrls: { source: `${f.queues.sourceUrl}-nope` },
    });
    try {
      const outcomes = await missing
        .publisher('outbox')
        .publish((await store().claimAll()).map((r) => r.envelope));
      expect(outcomes[0]).toMatchObject({ ok: false, reason: 'unroutable' });
    } finally {
      await missing.close();
    }
  });

  it('FIFO: group id = aggregate id, deduplication id = event id', async () => {
    const f = await fixture('relay_sqs_fifo', { fifo: true });
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

  const store = () => ({
    claimAll: () => t.db.transaction((tx) => new OutboxStore('outbox').claim(tx, 100)),
  });
});
