import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type { Publisher } from '../../shared/index.js';
import { newEnvelope, OutboxRelay, OutboxStore } from '../../shared/index.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { DEV_TEMPLATES_TIMEOUT_MS, devTemplates, runDev } from '../helpers/child.js';
import { inOrder } from '../helpers/consumerRigs.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { RELAY_RIGS, type RelayRig } from '../helpers/relayRigs.js';

const options = {
  table: 'outbox' as const,
  batchSize: 100,
  maxAttempts: 5,
  retryBaseMs: 50,
  retryMaxMs: 200,
};

describe.each(RELAY_RIGS)('outbox relay → $name', { concurrent: true }, (h) => {
  let t: TestDatabase;
  let orders: OrderService;
  let rig: RelayRig;
  beforeAll(async () => {
    // a test below runs `npm run dev`, which reads its settings from the templates
    await devTemplates('rabbitmq', 'sqs');
    t = await createTestDatabase(`relay_${h.name}`);
    orders = new OrderService({ db: t.db });
  }, DEV_TEMPLATES_TIMEOUT_MS);
  afterAll(() => t?.drop());
  beforeEach(async () => {
    await t.db.query('TRUNCATE orders, outbox');
    rig = await h.setup('relay');
  });
  afterEach(() => rig?.close());

  const unpublished = async () =>
    Number(
      (
        await t.db.query<{ n: string }>(
          'SELECT count(*) AS n FROM outbox WHERE published_at IS NULL',
        )
      ).rows[0]?.n,
    );
  const placeOrders = async (n: number, correlationId?: string) => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const placed = await orders.place({
        sku: 'sku-1',
        quantity: 1,
        correlationId: correlationId ?? `c-${i}`,
      });
      ids.push(placed.eventId);
    }
    return ids;
  };
  const idsOf = (messages: { messageId: string | undefined }[]) =>
    new Set(messages.map((m) => m.messageId));

  it(
    'publishes confirmed, durable messages carrying the envelope id, type, correlation id and schema version',
    inOrder,
    async () => {
      const { eventId, orderId } = await orders.place({
        sku: 'sku-1',
        quantity: 2,
        correlationId: 'c-0',
      });
      const ids = [eventId, ...(await placeOrders(24, 'c-more'))];
      const relay = new OutboxRelay(
        { db: t.db, publisher: rig.backend.publisher('outbox') },
        options,
      );

      expect(await relay.runOnce()).toMatchObject({ claimed: 25, published: 25, failed: 0 });
      expect(await unpublished()).toBe(0);
      const got = await rig.orders((m) => m.length >= 25);
      expect(idsOf(got)).toEqual(new Set(ids));
      const first = got.find((m) => m.messageId === eventId);
      expect(first).toMatchObject({
        type: 'order.created',
        correlationId: 'c-0',
        schemaVersion: '1.0',
        durable: true,
      });
      expect(first?.body).toMatchObject({
        id: eventId,
        type: 'order.created',
        aggregate: { type: 'order', id: orderId, version: 1 },
        data: { orderId, sku: 'sku-1', quantity: 2 },
      });
      // a tap (RabbitMQ's audit.orders, order.#) got its own copies
      if (rig.tapCopies) expect(await rig.tapCopies()).toBe(25);
    },
  );

  it(
    'broker down while orders are created (200; 50 where bulk sends are slow): nothing marked and no attempt charged meanwhile; everything published once it is back',
    inOrder,
    async () => {
      const n = h.quickBulkSends ? 200 : 50;
      const { backend: viaProxy, proxy } = await rig.throughProxy();
      const relay = new OutboxRelay(
        { db: t.db, publisher: viaProxy.publisher('outbox') },
        { ...options, readyTimeoutMs: 300 },
      );
      const abort = new AbortController();
      try {
        await relay.runOnce(); // reaches the broker through the proxy
        proxy.cut();
        const draining = relay.drain({ budgetMs: 60_000, idleWaitMs: 20, signal: abort.signal });
        const ids = await placeOrders(n, 'down');
        // while the broker is unreachable nothing is marked published, and the relay keeps trying
        expect(await unpublished()).toBe(n);
        await waitFor(() => proxy.refused >= 2, {
          message: 'reconnect attempts during the outage',
        });
        expect(await unpublished()).toBe(n);
        const { rows } = await t.db.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM outbox WHERE attempts > 0',
        );
        expect(rows[0]?.n).toBe(0);

        proxy.restore();
        await waitFor(async () => (await unpublished()) === 0, {
          timeoutMs: 30_000,
          message: 'outbox drained',
        });
        abort.abort();
        expect((await draining).published).toBe(n);
        const seen = await rig.orders((m) => {
          const got = idsOf(m);
          return ids.every((id) => got.has(id));
        });
        expect(idsOf(seen)).toEqual(new Set(ids));
        // rows charged no attempts for an outage they were never sent into
        const attention = await t.db.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM outbox WHERE needs_attention_at IS NOT NULL',
        );
        expect(attention.rows[0]?.n).toBe(0);
      } finally {
        abort.abort();
      }
    },
  );

  it(
    'relay.after-publish:exit in a child process: after a restart the event is published again with the same id (a broker that deduplicates publishes drops the copy)',
    inOrder,
    async () => {
      const { eventId } = await orders.place({ sku: 'sku-1', quantity: 1, correlationId: 'crash' });
      const child = await runDev(['--transport', rig.backend.transport, '--role', 'relay'], {
        FAULTS: 'relay.after-publish:exit',
        DATABASE_URL: t.url,
        INVENTORY_DATABASE_URL: t.url,
        ...rig.devEnv,
      });
      expect(child.signal, child.stderr).toBe('SIGKILL');
      expect(child.stderr).toContain('FAULT relay.after-publish');
      // confirmed by the broker, but never marked
      expect(await unpublished()).toBe(1);
      await waitFor(async () => (await rig.backend.inspect()).ready === 1, {
        message: 'the published copy waits for the consumer',
      });

      // The killed relay's session holds its row lock until the server sees the connection
      // gone (a moment after the kill): a claim before that skips the locked row.
      await waitFor(
        async () =>
          (
            await t.db.query<{ n: number }>(
              "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
            )
          ).rows[0]?.n === 0,
        { message: "the killed relay's session gone" },
      );
      // the restarted relay (no fault) publishes it again
      const relay = new OutboxRelay(
        { db: t.db, publisher: rig.backend.publisher('outbox') },
        options,
      );
      expect(await relay.runOnce()).toMatchObject({ published: 1 });
      expect(await unpublished()).toBe(0);
      // a duplicate, never a loss; where the broker deduplicates, its window drops the copy
      const deduplicated = rig.backend.capabilities.publishDeduplication;
      const messages = await rig.orders((m) => m.length >= (deduplicated ? 1 : 2));
      expect(messages.map((m) => m.messageId)).toEqual(
        deduplicated ? [eventId] : [eventId, eventId],
      );
      if (deduplicated) expect((await rig.backend.inspect()).ready).toBe(0);
    },
  );

  it(
    'a publish to a missing destination fails as unroutable; the backend still publishes to the right one',
    inOrder,
    async () => {
      const { eventId } = await orders.place({
        sku: 'sku-1',
        quantity: 1,
        correlationId: 'nowhere',
      });
      const envelopes = (
        await t.db.transaction((tx) => new OutboxStore('outbox').claim(tx, 100))
      ).map((r) => r.envelope);
      const [lost] = await rig.missingDestination().publish(envelopes);
      expect(lost).toMatchObject({ id: eventId, ok: false, reason: 'unroutable' });
      expect(lost?.ok === false && lost.error).toMatch(h.missingDestinationError);
      expect(await rig.backend.publisher('outbox').publish(envelopes)).toEqual([
        { id: eventId, ok: true },
      ]);
      const [msg] = await rig.orders((m) => m.length >= 1);
      expect(msg?.messageId).toBe(eventId);
    },
  );

  it('serves inventory_outbox too: its events go to the results destination', inOrder, async () => {
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
      { db: t.db, publisher: rig.backend.publisher('inventory_outbox') },
      { ...options, table: 'inventory_outbox' },
    );
    expect(await relay.runOnce()).toMatchObject({ published: 1 });
    const [msg] = await rig.results((m) => m.length >= 1);
    expect(msg).toMatchObject({ messageId: envelope.id, type: 'inventory.reservation_rejected' });
    expect((await store.status(t.db)).backlog).toBe(0);
  });

  it.runIf(h.quickBulkSends)(
    'four relays draining 2,000 rows concurrently publish every row exactly once',
    inOrder,
    async () => {
      await t.db.query(
        `INSERT INTO outbox (id, event_type, schema_version, aggregate_type, aggregate_id, aggregate_version,
                           payload, producer, correlation_id, occurred_at)
       SELECT gen_random_uuid(), 'order.created', '1.0', 'order', gen_random_uuid()::text, 1,
              jsonb_build_object('n', g), 'test', 'bulk', now() - (2000 - g) * interval '1 ms'
         FROM generate_series(1, 2000) g`,
      );
      const published = new Map<string, number>();
      const relays = Array.from({ length: 4 }, (_, i) => {
        const db = new PgDatabase({
          connectionString: t.url,
          max: 2,
          applicationName: `relay-${i}`,
        });
        const inner = rig.backend.publisher('outbox');
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
        await waitFor(async () => (await rig.backend.inspect()).ready === 2000, {
          message: '2,000 waiting for the consumer',
        });
      } finally {
        await Promise.all(relays.map(({ db }) => db.close()));
      }
    },
  );
});
