import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { ChannelModel } from 'amqplib';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createScratch, type ScratchEnvironment } from '../../devkit/scratch.js';
import { TcpProxy } from '../../devkit/tcpProxy.js';
import { waitFor } from '../../devkit/waitFor.js';
import { DEFAULT_RETENTION, TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import { newEnvelope } from '../../shared/envelope/envelope.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { OutboxRelay } from '../../shared/outbox/OutboxRelay.js';
import { OutboxStore } from '../../shared/outbox/OutboxStore.js';
import type { Publisher } from '../../shared/port/types.js';
import {
  RABBITMQ_NAMES,
  type RabbitMqBackend,
  SCHEMA_VERSION_HEADER,
} from '../../shared/transport/rabbitmq/index.js';
import { queueDepth, readMessages, testConnection } from '../helpers/amqp.js';
import { DEV_TEMPLATES_TIMEOUT_MS, devTemplates } from '../helpers/child.js';
import type { TestDatabase } from '../helpers/db.js';
import { amqpUrlVia } from '../helpers/rabbit.js';
import { AMQP_URL, SERVICES } from '../helpers/services.js';

const options = {
  table: 'outbox' as const,
  batchSize: 100,
  maxAttempts: 5,
  retryBaseMs: 50,
  retryMaxMs: 200,
};

describe('outbox relay → RabbitMQ', () => {
  let scratch: ScratchEnvironment;
  let t: TestDatabase;
  let assertConn: ChannelModel;
  let backend: RabbitMqBackend;
  let orders: OrderService;

  /** A RabbitMQ backend on this file's vhost (through `url` when given, e.g. a proxy). */
  const backendFor = (url?: string, extra: { routeCheck?: false } = {}) =>
    scratch.backend(
      'rabbitmq',
      { budget: TEST_RETRY_BUDGET, retention: DEFAULT_RETENTION, consumer: 'relay-test' },
      {
        ...(url ? { url } : {}),
        ...extra,
        reconnect: { baseMs: 50, maxMs: 500 },
        publish: { confirmTimeoutMs: 5_000, connectTimeoutMs: 1_000 },
      },
    );
  const vhost = () => scratch.vhost?.vhost as string;

  beforeAll(async () => {
    // a test below runs `npm run dev`, which reads its settings from the templates
    await devTemplates('rabbitmq');
    scratch = await createScratch(SERVICES, 'relay_rabbitmq');
    t = scratch.database;
    orders = new OrderService({ db: t.db });
    assertConn = await testConnection(scratch.vhost?.amqpUrl as string);
  }, DEV_TEMPLATES_TIMEOUT_MS);
  afterAll(async () => {
    await assertConn?.close().catch(() => {});
    await scratch?.close();
  });
  beforeEach(async () => {
    backend = backendFor();
    await backend.prepare('publish');
    await backend.withChannel(async (ch) => {
      await ch.purgeQueue(RABBITMQ_NAMES.inventoryQueue);
      await ch.purgeQueue(RABBITMQ_NAMES.auditQueue);
    });
    await t.db.query('TRUNCATE orders, outbox');
  });
  afterEach(() => backend.close());

  /** The relay's publisher of the `outbox` stream (or of another exchange by name). */
  const publisherFor = (b: RabbitMqBackend, exchange?: string): Publisher =>
    b.publisher('outbox', exchange ? { exchange } : {});

  const placeOrders = async (n: number) => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      ids.push(
        (await orders.place({ sku: 'sku-1', quantity: 1, correlationId: `c-${i}` })).eventId,
      );
    }
    return ids;
  };

  const unpublished = async (db = t.db) =>
    Number(
      (await db.query<{ n: string }>('SELECT count(*) AS n FROM outbox WHERE published_at IS NULL'))
        .rows[0]?.n,
    );

  it('publishes a confirmed, persistent message carrying the envelope id, type, correlation id and schema version', async () => {
    const { eventId, orderId } = await orders.place({
      sku: 'sku-1',
      quantity: 2,
      correlationId: 'corr-1',
    });
    const relay = new OutboxRelay({ db: t.db, publisher: publisherFor(backend) }, options);

    const round = await relay.runOnce();

    expect(round).toMatchObject({ claimed: 1, published: 1, failed: 0 });
    expect(await unpublished()).toBe(0);
    const [msg] = await readMessages(
      assertConn,
      RABBITMQ_NAMES.inventoryQueue,
      (m) => m.length >= 1,
    );
    expect(msg).toMatchObject({
      messageId: eventId,
      type: 'order.created',
      correlationId: 'corr-1',
      deliveryMode: 2,
      headers: { [SCHEMA_VERSION_HEADER]: '1.0' },
    });
    expect(msg?.body).toMatchObject({
      id: eventId,
      type: 'order.created',
      aggregate: { type: 'order', id: orderId, version: 1 },
      data: { orderId, sku: 'sku-1', quantity: 2 },
    });
    // the audit queue (order.#) got its own copy
    expect(await queueDepth(assertConn, RABBITMQ_NAMES.auditQueue)).toBe(1);
  });

  it('broker down while 200 orders are created: everything is published once the broker is back', async () => {
    const proxy = await new TcpProxy('127.0.0.1', Number(new URL(AMQP_URL).port || 5672)).start();
    const viaProxy = backendFor(amqpUrlVia(proxy.port, vhost()));
    const relay = new OutboxRelay(
      { db: t.db, publisher: publisherFor(viaProxy) },
      { ...options, readyTimeoutMs: 300 },
    );
    const abort = new AbortController();
    try {
      await relay.runOnce(); // connects through the proxy
      proxy.cut();
      const draining = relay.drain({ budgetMs: 60_000, idleWaitMs: 20, signal: abort.signal });
      const ids = await placeOrders(200);
      // while the broker is unreachable nothing is marked published, and the relay keeps trying
      expect(await unpublished()).toBe(200);
      await waitFor(() => proxy.refused >= 2, { message: 'reconnect attempts during the outage' });
      expect(await unpublished()).toBe(200);

      proxy.restore();
      await waitFor(async () => (await unpublished()) === 0, {
        timeoutMs: 30_000,
        message: 'outbox drained',
      });
      abort.abort();
      const result = await draining;
      expect(result.published).toBe(200);

      const seen = await readMessages(assertConn, RABBITMQ_NAMES.inventoryQueue, (m) => {
        const got = new Set(m.map((x) => x.messageId));
        return ids.every((id) => got.has(id));
      });
      expect(new Set(seen.map((m) => m.messageId))).toEqual(new Set(ids));
      // rows charged no attempts for an outage they were never sent into
      const { rows } = await t.db.query<{ n: string }>(
        'SELECT count(*) AS n FROM outbox WHERE needs_attention_at IS NOT NULL',
      );
      expect(Number(rows[0]?.n)).toBe(0);
    } finally {
      abort.abort();
      await viaProxy.close();
      await proxy.close();
    }
  });

  it('messages in flight when the connection dies count as failed, never as confirmed', async () => {
    const proxy = await new TcpProxy('127.0.0.1', Number(new URL(AMQP_URL).port || 5672)).start();
    const viaProxy = backendFor(amqpUrlVia(proxy.port, vhost()));
    try {
      const publisher = publisherFor(viaProxy);
      await publisher.ready();
      const envelopes = Array.from({ length: 3_000 }, (_, i) =>
        newEnvelope({
          type: 'order.created',
          aggregate: { type: 'order', id: randomUUID(), version: 1 },
          data: { i },
          correlationId: 'inflight',
          producer: 'test',
        }),
      );
      const publishing = publisher.publish(envelopes);
      // cut once the broker has confirmed something, so the cut lands mid-batch
      await waitFor(async () => (await queueDepth(assertConn, RABBITMQ_NAMES.inventoryQueue)) > 0, {
        intervalMs: 5,
      });
      proxy.cut();
      const outcomes = await publishing;

      expect(outcomes).toHaveLength(envelopes.length);
      const failed = outcomes.filter((o) => !o.ok);
      expect(failed.length).toBeGreaterThan(0);
      for (const f of failed) expect(f).toMatchObject({ reason: 'connection' });
      // every message reported confirmed really is in the queue
      const confirmed = new Set(outcomes.filter((o) => o.ok).map((o) => o.id));
      const inQueue = await readMessages(assertConn, RABBITMQ_NAMES.inventoryQueue, (m) => {
        const got = new Set(m.map((x) => x.messageId));
        return [...confirmed].every((id) => got.has(id));
      });
      expect(inQueue.length).toBeGreaterThanOrEqual(confirmed.size);
    } finally {
      await viaProxy.close();
      await proxy.close();
    }
  });

  it('relay.after-publish:exit in a child process: after a restart the event is published again with the same id', async () => {
    const { eventId } = await orders.place({ sku: 'sku-1', quantity: 1, correlationId: 'crash' });
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'bin/dev.ts', '--transport', 'rabbitmq', '--role', 'relay'],
      {
        env: {
          ...process.env,
          FAULTS: 'relay.after-publish:exit',
          DATABASE_URL: t.url,
          AMQP_URL: scratch.vhost?.amqpUrl as string,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>(
      (resolve) => child.on('exit', (code, signal) => resolve({ code, signal })),
    );
    expect(exit.signal, stderr).toBe('SIGKILL');
    expect(stderr).toContain('FAULT relay.after-publish');
    // confirmed by the broker, but never marked
    expect(await unpublished()).toBe(1);
    await waitFor(async () => (await queueDepth(assertConn, RABBITMQ_NAMES.inventoryQueue)) === 1);

    // the restarted relay (no fault) publishes it again
    const relay = new OutboxRelay({ db: t.db, publisher: publisherFor(backend) }, options);
    expect(await relay.runOnce()).toMatchObject({ published: 1 });
    expect(await unpublished()).toBe(0);
    const messages = await readMessages(
      assertConn,
      RABBITMQ_NAMES.inventoryQueue,
      (m) => m.length >= 2,
    );
    expect(messages.map((m) => m.messageId)).toEqual([eventId, eventId]); // a duplicate, never a loss
  });

  it('unroutable publish (bindings removed): the row is not marked, attempts and last_error are set', async () => {
    // The broker's own answer (mandatory → returned), as without the management API: with the
    // route check on, the message is held back as `route-missing` (queues.rabbitmq.test.ts).
    const unchecked = backendFor(undefined, { routeCheck: false });
    await backend.withChannel(async (ch) => {
      await ch.unbindQueue(
        RABBITMQ_NAMES.inventoryQueue,
        RABBITMQ_NAMES.ordersExchange,
        'order.created',
      );
      await ch.unbindQueue(RABBITMQ_NAMES.auditQueue, RABBITMQ_NAMES.ordersExchange, 'order.#');
    });
    try {
      const { eventId } = await orders.place({
        sku: 'sku-1',
        quantity: 1,
        correlationId: 'unroutable',
      });
      const relay = new OutboxRelay({ db: t.db, publisher: publisherFor(unchecked) }, options);
      // The database's clock before the round: the failure is marked later, so its next attempt
      // is at least the first backoff step (base/2 with equal jitter) after this instant. Measured
      // against this, not against now() when the test reads it back (a loaded machine may read it
      // after the short backoff has passed).
      const before = await t.db.query<{ at: string }>('SELECT clock_timestamp()::text AS at');

      expect(await relay.runOnce()).toMatchObject({ claimed: 1, published: 0, failed: 1 });

      const { rows } = await t.db.query<{
        published_at: Date | null;
        attempts: number;
        last_error: string;
        backoff_ms: number;
      }>(
        `SELECT published_at, attempts, last_error,
                extract(epoch FROM next_attempt_at - $2::timestamptz)::float8 * 1000 AS backoff_ms
           FROM outbox WHERE id = $1`,
        [eventId, before.rows[0]?.at ?? null],
      );
      expect(rows[0]).toMatchObject({ published_at: null, attempts: 1 });
      expect(rows[0]?.last_error).toMatch(/^unroutable: returned: 312 NO_ROUTE/);
      // backed off, not retried hot
      expect(rows[0]?.backoff_ms).toBeGreaterThanOrEqual(options.retryBaseMs / 2);

      // after maxAttempts the row needs attention and leaves the batches
      for (let i = 1; i < options.maxAttempts; i++) {
        await t.db.query('UPDATE outbox SET next_attempt_at = now()');
        await relay.runOnce();
      }
      const status = await relay.store.status(t.db);
      expect(status).toMatchObject({ needsAttention: 1, backlog: 0 });
      await t.db.query('UPDATE outbox SET next_attempt_at = now()');
      expect(await relay.runOnce()).toMatchObject({ claimed: 0 });
    } finally {
      await backend.prepare('publish');
      await unchecked.close();
    }
  });

  it('a missing exchange fails the batch as unroutable without losing the connection for good', async () => {
    await orders.place({ sku: 'sku-1', quantity: 1, correlationId: 'no-exchange' });
    const relay = new OutboxRelay(
      { db: t.db, publisher: publisherFor(backend, 'no-such-exchange') },
      options,
    );
    expect(await relay.runOnce()).toMatchObject({ published: 0, failed: 1 });
    const { rows } = await t.db.query<{ last_error: string }>('SELECT last_error FROM outbox');
    expect(rows[0]?.last_error).toMatch(/^unroutable: .*NOT_FOUND/);
    // the same connection still publishes to the right exchange
    await t.db.query('UPDATE outbox SET next_attempt_at = now()');
    const good = new OutboxRelay({ db: t.db, publisher: publisherFor(backend) }, options);
    expect(await good.runOnce()).toMatchObject({ published: 1 });
  });

  it('serves inventory_outbox too: its events go to the inventory exchange', async () => {
    const store = new OutboxStore('inventory_outbox');
    const envelope = newEnvelope({
      type: 'inventory.reservation_rejected',
      aggregate: { type: 'order', id: randomUUID(), version: 1 },
      data: { reason: 'out_of_stock' },
      correlationId: 'inv-1',
      producer: 'inventory-service',
    });
    await t.db.transaction((tx) => store.append(tx, envelope));
    const relay = new OutboxRelay(
      { db: t.db, publisher: backend.publisher('inventory_outbox') },
      { ...options, table: 'inventory_outbox' },
    );
    expect(await relay.runOnce()).toMatchObject({ published: 1 });
    const [msg] = await readMessages(
      assertConn,
      RABBITMQ_NAMES.inventoryResultsQueue,
      (m) => m.length >= 1,
    );
    expect(msg).toMatchObject({ messageId: envelope.id, type: 'inventory.reservation_rejected' });
    expect((await store.status(t.db)).backlog).toBe(0);
  });

  it('four relays draining 2,000 rows concurrently publish every row exactly once', async () => {
    await t.db.query(
      `INSERT INTO outbox (id, event_type, schema_version, aggregate_type, aggregate_id, aggregate_version,
                           payload, producer, correlation_id, occurred_at)
       SELECT gen_random_uuid(), 'order.created', '1.0', 'order', gen_random_uuid()::text, 1,
              jsonb_build_object('n', g), 'test', 'bulk', now() - (2000 - g) * interval '1 ms'
         FROM generate_series(1, 2000) g`,
    );
    const published = new Map<string, number>();
    const relays = Array.from({ length: 4 }, (_, i) => {
      const db = new PgDatabase({ connectionString: t.url, max: 2, applicationName: `relay-${i}` });
      const inner = publisherFor(backend);
      const counting: Publisher = {
        ready: (ms) => inner.ready(ms),
        close: () => inner.close(),
        publish: async (envelopes) => {
          for (const e of envelopes) published.set(e.id, (published.get(e.id) ?? 0) + 1);
          return inner.publish(envelopes);
        },
      };
      return {
        db,
        relay: new OutboxRelay({ db, publisher: counting }, { ...options, batchSize: 50 }),
      };
    });
    try {
      const results = await Promise.all(
        relays.map(({ relay }) =>
          relay.drain({ budgetMs: 30_000, idleWaitMs: 10, stopWhenIdle: true }),
        ),
      );
      expect(await unpublished()).toBe(0);
      expect(published.size).toBe(2000);
      expect([...published.values()].every((n) => n === 1)).toBe(true);
      expect(results.reduce((s, r) => s + r.published, 0)).toBe(2000);
      // the work was actually shared
      expect(results.filter((r) => r.published > 0).length).toBeGreaterThan(1);
      expect(await queueDepth(assertConn, RABBITMQ_NAMES.inventoryQueue)).toBe(2000);
    } finally {
      await Promise.all(relays.map(({ db }) => db.close()));
    }
  });
});
