import { randomUUID } from 'node:crypto';
import type { ChannelModel } from 'amqplib';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createScratch, type ScratchEnvironment } from '../../devkit/scratch.js';
import { TcpProxy } from '../../devkit/TcpProxy.js';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import type { Publisher } from '../../shared/index.js';
import { DEFAULT_RETENTION, newEnvelope, OutboxRelay } from '../../shared/index.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import type { RabbitMqBackend } from '../../shared/transport/rabbitmq/index.js';
import { queueDepth, readMessages, testConnection } from '../helpers/amqp.js';
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

/**
 * What only RabbitMQ has: publisher confirms outstanding on a connection that dies, a mandatory
 * publish the broker returns for want of a route, and a channel closed by a missing exchange
 * (the publisher is ready all the same, so the relay takes the rows). The relay tests every
 * transport runs are in relay.test.ts.
 */
describe('outbox relay → RabbitMQ: confirms, returns, channel errors', () => {
  let scratch: ScratchEnvironment;
  let t: TestDatabase;
  let assertConn: ChannelModel;
  let backend: RabbitMqBackend;
  let orders: OrderService;

  /** A RabbitMQ backend on this file's vhost (through `url` when given, e.g. a proxy). */
  const backendFor = (url?: string, extra: { routeCheck?: false } = {}) =>
    scratch.backend(
      'rabbitmq',
      {
        budget: TEST_RETRY_BUDGET,
        retention: DEFAULT_RETENTION,
        consumer: 'relay-test',
        topology: PIPELINE_TOPOLOGY,
      },
      {
        ...(url ? { url } : {}),
        ...extra,
        reconnect: { baseMs: 50, maxMs: 500 },
        publish: { confirmTimeoutMs: 5_000, connectTimeoutMs: 1_000 },
      },
    );
  const vhost = () => scratch.vhost?.vhost as string;

  beforeAll(async () => {
    scratch = await createScratch(SERVICES, 'relay_rabbitmq');
    t = scratch.database;
    orders = new OrderService({ db: t.db });
    assertConn = await testConnection(scratch.vhost?.amqpUrl as string);
  });
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
});
