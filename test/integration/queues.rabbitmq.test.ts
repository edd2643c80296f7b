import { randomUUID } from 'node:crypto';
import type { ChannelModel } from 'amqplib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createScratch, type ScratchEnvironment } from '../../devkit/scratch.js';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { DEFAULT_RETENTION, newEnvelope, OutboxRelay } from '../../shared/index.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { RABBITMQ_NAMES, RETRY_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { RABBITMQ_DEFAULTS } from '../../shared/transport/rabbitmq/constants.js';
import {
  declaredTopology,
  QUEUE_BOUNDS,
  type RabbitMqBackend,
} from '../../shared/transport/rabbitmq/index.js';
import { publishQueueMetrics } from '../../shared/transport/rabbitmq/queueMetrics.js';
import { requiredRoutes, topicMatches } from '../../shared/transport/rabbitmq/routes.js';
import { applyPolicies } from '../../shared/transport/rabbitmq/topology.js';
import { queueDepth, readMessages, testConnection } from '../helpers/amqp.js';
import { SERVICES } from '../helpers/services.js';

/**
 * Every declared queue has a consumer or a bound (by policy), and a missing
 * route to `inventory.orders` is never silent although `audit.orders` (bound to `order.#`) still
 * takes every order event.
 */
describe('queue bounds and missing routes (RabbitMQ)', () => {
  let scratch: ScratchEnvironment;
  let conn: ChannelModel;
  let orders: OrderService;
  const relayOptions = {
    table: 'outbox' as const,
    batchSize: 100,
    maxAttempts: 5,
    retryBaseMs: 50,
    retryMaxMs: 200,
  };
  const vhost = () => scratch.vhost?.vhost as string;
  const backendFor = (overrides: Record<string, unknown> = {}) =>
    scratch.backend(
      'rabbitmq',
      {
        budget: TEST_RETRY_BUDGET,
        retention: DEFAULT_RETENTION,
        consumer: 'queues-test',
        topology: PIPELINE_TOPOLOGY,
      },
      {
        reconnect: { baseMs: 50, maxMs: 500 },
        publish: { confirmTimeoutMs: 5_000, connectTimeoutMs: 1_000 },
        routeCheck: { intervalMs: 100 },
        ...overrides,
      },
    ) as RabbitMqBackend;
  const purge = (b: RabbitMqBackend) =>
    b.withChannel(async (ch) => {
      for (const q of [RABBITMQ_NAMES.inventoryQueue, RABBITMQ_NAMES.auditQueue]) {
        await ch.purgeQueue(q);
      }
    });

  beforeAll(async () => {
    scratch = await createScratch(SERVICES, 'queues_rabbitmq');
    orders = new OrderService({ db: scratch.database.db });
    conn = await testConnection(scratch.vhost?.amqpUrl as string);
    await backendFor().prepare('consume');
  });
  afterAll(async () => {
    await conn?.close().catch(() => {});
    await scratch?.close();
  });
  beforeEach(async () => {
    await scratch.database.db.query('TRUNCATE orders, outbox');
  });

  it('knows which declared routes a routing key needs (taps left out)', () => {
    const { topology } = declaredTopology(PIPELINE_TOPOLOGY, TEST_RETRY_BUDGET, DEFAULT_RETENTION);
    expect(requiredRoutes(topology, RABBITMQ_NAMES.ordersExchange)).toEqual([
      { queue: RABBITMQ_NAMES.inventoryQueue, pattern: 'order.created' },
      { queue: RABBITMQ_NAMES.inventoryQueue, pattern: 'order.cancelled' },
    ]);
    expect(requiredRoutes(topology, RABBITMQ_NAMES.inventoryExchange)).toEqual([
      { queue: RABBITMQ_NAMES.inventoryResultsQueue, pattern: 'inventory.#' },
    ]);
    expect(topicMatches('inventory.#', 'inventory.reservation_rejected')).toBe(true);
    expect(topicMatches('inventory.#', 'inventory')).toBe(true);
    expect(topicMatches('order.*', 'order.created.v2')).toBe(false);
    expect(topicMatches('*.created', 'order.created')).toBe(true);
    expect(topicMatches('order.created', 'order.cancelled')).toBe(false);
  });

  it('a lost inventory.orders binding: rows stay unpublished with the reason, RouteMissing says so; rebound, they flow', async () => {
    const backend = backendFor();
    await backend.prepare('publish');
    await purge(backend);
    const relay = new OutboxRelay(
      { db: scratch.database.db, publisher: backend.publisher('outbox') },
      relayOptions,
    );
    const binding = [
      RABBITMQ_NAMES.inventoryQueue,
      RABBITMQ_NAMES.ordersExchange,
      'order.created',
    ] as const;
    await backend.withChannel((ch) => ch.unbindQueue(...binding));
    try {
      const { eventId } = await orders.place({ sku: 'sku-q', quantity: 1, correlationId: 'rm-1' });

      // The route is missing: the message is held back (not sent) and the row not marked published.
      expect(await relay.runOnce()).toMatchObject({ claimed: 1, published: 0, failed: 1 });
      const { rows } = await scratch.database.db.query<{
        published_at: Date | null;
        attempts: number;
        last_error: string;
      }>('SELECT published_at, attempts, last_error FROM outbox WHERE id = $1', [eventId]);
      expect(rows[0]).toMatchObject({ published_at: null, attempts: 1 });
      expect(rows[0]?.last_error).toMatch(
        /^route-missing: no binding orders → inventory\.orders \(order\.created\)/,
      );
      expect(await queueDepth(conn, RABBITMQ_NAMES.auditQueue)).toBe(0); // not sent: no copy to the tap
      expect(await queueDepth(conn, RABBITMQ_NAMES.inventoryQueue)).toBe(0);

      // The metric the alarm watches.
      const inspection = await backend.inspect();
      expect(inspection.routesMissing).toEqual({
        [RABBITMQ_NAMES.inventoryQueue]: 1,
        [RABBITMQ_NAMES.inventoryResultsQueue]: 0,
      });
      expect(publishQueueMetrics(inspection)[RABBITMQ_NAMES.inventoryQueue]).toMatchObject({
        routeMissing: 1,
      });

      // An event type that needs no missing route still flows (order.cancelled is bound).
      await backend.withChannel((ch) => ch.bindQueue(...binding));
      await scratch.database.db.query('UPDATE outbox SET next_attempt_at = now()');
      await waitFor(
        async () => {
          await scratch.database.db.query('UPDATE outbox SET next_attempt_at = now()');
          return (await relay.runOnce()).published === 1;
        },
        { message: 'the row is published once the binding is back' },
      );
      const [msg] = await readMessages(conn, RABBITMQ_NAMES.inventoryQueue, (m) => m.length >= 1);
      expect(msg?.messageId).toBe(eventId);
      // one copy in the tap: the retries while the route was missing sent nothing
      expect(await queueDepth(conn, RABBITMQ_NAMES.auditQueue)).toBe(1);
      expect((await backend.inspect()).routesMissing?.[RABBITMQ_NAMES.inventoryQueue]).toBe(0);
    } finally {
      await backend.withChannel((ch) => ch.bindQueue(...binding));
      await backend.close();
    }
  });

  it('a management API that does not answer: publishing goes on unverified (logged once)', async () => {
    const warnings: string[] = [];
    const logger = {
      warn: (m: string) => warnings.push(m),
      info: () => {},
      error: () => {},
      debug: () => {},
    };
    const backend = backendFor({
      managementUrl: 'http://guest:guest@127.0.0.1:9/',
      routeCheck: { intervalMs: 100, timeoutMs: 500 },
      logger,
    });
    try {
      const publisher = backend.publisher('outbox');
      for (let i = 0; i < 3; i++) {
        const e = newEnvelope({
          type: 'order.created',
          aggregate: { type: 'order', id: randomUUID(), version: 1 },
          data: {},
          correlationId: `no-mgmt-${i}`,
          producer: 'test',
        });
        expect(await publisher.publish([e])).toEqual([{ id: e.id, ok: true }]);
      }
      expect(warnings.filter((w) => w.startsWith('route check unavailable'))).toHaveLength(1);
      expect((await backend.inspect()).routesMissing).toBeUndefined();
    } finally {
      await backend.close();
    }
  });

  it('the bounded queues carry their policies (max-length, overflow, TTL) on the broker', async () => {
    const management = scratch.vhost?.management;
    // The management API refreshes each queue's view on its own: wait for each one.
    const effective = (queue: string) =>
      waitFor(
        async () =>
          (
            await management?.request<{ effective_policy_definition?: Record<string, unknown> }>(
              'GET',
              `/api/queues/${encodeURIComponent(vhost())}/${encodeURIComponent(queue)}`,
            )
          )?.effective_policy_definition,
        { message: `the policy in effect on ${queue}` },
      );
    expect(await effective(RABBITMQ_NAMES.auditQueue)).toEqual({
      'max-length': QUEUE_BOUNDS.audit.maxLength,
      'message-ttl': QUEUE_BOUNDS.audit.messageTtlMs,
      overflow: 'drop-head',
      'delivery-limit': QUEUE_BOUNDS.audit.deliveryLimit,
    });
    // the parking queues are read by giving messages back: no delivery limit (-1 from RabbitMQ
    // 4.0, whose default is 20; none on 3.x, which refuses -1)
    const major = Number(((await management?.version()) ?? '0').split('.')[0]);
    const unlimited = major >= 4 ? { 'delivery-limit': -1 } : {};
    // …and results over their delivery limit go to their parking queue (not dropped, as a
    // RabbitMQ 4 quorum queue without a dead-letter exchange does at its default limit of 20)
    expect(await effective(RABBITMQ_NAMES.inventoryResultsQueue)).toEqual({
      'max-length': QUEUE_BOUNDS.inventoryResults.maxLength,
      overflow: 'reject-publish',
      'dead-letter-exchange': RABBITMQ_NAMES.resultsParkingExchange,
      'dead-letter-routing-key': RABBITMQ_NAMES.resultsParkingRoutingKey,
      'dead-letter-strategy': 'at-least-once',
      'delivery-limit': RABBITMQ_DEFAULTS.resultsDeliveryLimit,
    });
    expect(await effective(RABBITMQ_NAMES.resultsParkingQueue)).toEqual({
      'message-ttl': DEFAULT_RETENTION.parkingMs,
      'max-length': QUEUE_BOUNDS.resultsParking.maxLength,
      overflow: 'reject-publish',
      ...unlimited,
    });
    expect(await effective(RETRY_NAMES.parkingQueue)).toEqual({
      'message-ttl': DEFAULT_RETENTION.parkingMs,
      'max-length': QUEUE_BOUNDS.parking.maxLength,
      overflow: 'reject-publish',
      ...unlimited,
    });
    // inventory.orders keeps its dead lettering and delivery limit (one policy per queue)
    expect(await effective(RABBITMQ_NAMES.inventoryQueue)).toMatchObject({
      'dead-letter-strategy': 'at-least-once',
      'delivery-limit': 10,
    });
  });

  it('at the bound the audit tap drops its oldest and the publish is confirmed; the results queue refuses with a nack (nothing dropped)', async () => {
    const backend = backendFor();
    const management = scratch.vhost?.management;
    if (!management) throw new Error('no management client');
    // The same policies with a bound of 2, to reach it.
    const small = declaredTopology(PIPELINE_TOPOLOGY, TEST_RETRY_BUDGET, DEFAULT_RETENTION)
      .policies.filter((p) =>
        [RABBITMQ_NAMES.auditQueue, RABBITMQ_NAMES.inventoryResultsQueue].includes(p.name as never),
      )
      .map((p) => ({ ...p, definition: { ...p.definition, 'max-length': 2 } }));
    await applyPolicies(management, vhost(), small);
    try {
      await purge(backend);
      const order = () =>
        newEnvelope({
          type: 'order.created',
          aggregate: { type: 'order', id: randomUUID(), version: 1 },
          data: {},
          correlationId: 'bound',
          producer: 'test',
        });
      const sent = [order(), order(), order()];
      const outcomes = await backend.publisher('outbox').publish(sent);
      expect(outcomes.map((o) => o.ok)).toEqual([true, true, true]);
      await waitFor(async () => (await queueDepth(conn, RABBITMQ_NAMES.auditQueue)) === 2, {
        message: 'audit.orders held at its bound',
      });
      const audit = await readMessages(conn, RABBITMQ_NAMES.auditQueue, (m) => m.length >= 2);
      expect(audit.map((m) => m.messageId)).toEqual([sent[1]?.id, sent[2]?.id]); // oldest dropped

      await backend.withChannel((ch) => ch.purgeQueue(RABBITMQ_NAMES.inventoryResultsQueue));
      const result = () =>
        newEnvelope({
          type: 'inventory.reservation_rejected',
          aggregate: { type: 'order', id: randomUUID(), version: 1 },
          data: { reason: 'out_of_stock' },
          correlationId: 'bound',
          producer: 'test',
        });
      // One at a time: a quorum queue may take one message past its bound (3.10 took a third at
      // max-length 2), then refuses with a nack, which the relay records as a failed publish.
      const seen: string[] = [];
      for (let i = 0; i < 4; i++) {
        const [o] = await backend.publisher('inventory_outbox').publish([result()]);
        seen.push(o?.ok ? 'ok' : (o?.reason ?? '?'));
      }
      expect(seen.at(-1)).toBe('nacked');
      const accepted = seen.filter((x) => x === 'ok').length;
      expect(accepted).toBeGreaterThanOrEqual(2);
      expect(accepted).toBeLessThanOrEqual(3);
      expect(await queueDepth(conn, RABBITMQ_NAMES.inventoryResultsQueue)).toBe(accepted);
    } finally {
      await backend.prepare('consume'); // the real bounds again
      await backend.close();
    }
  });
});
