import { randomUUID } from 'node:crypto';
import type { ChannelModel } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type RunningEventSource,
  startAmazonMqEventSource,
} from '../../devkit/lambda/eventSources.js';
import { scheduledEvent } from '../../devkit/triggers/scheduleTrigger.js';
import { waitFor } from '../../devkit/waitFor.js';
import { DB_SIDES, type DbSide } from '../../shared/pipeline/appRole.js';
import { RABBITMQ_NAMES, RETRY_NAMES } from '../../shared/pipeline/names.js';
import { serviceMigrations } from '../../shared/pipeline/schema.js';
import { RabbitManagement } from '../../shared/transport/rabbitmq/index.js';
import { queueDepth, testConnection } from '../helpers/amqp.js';
import {
  type BundleRig,
  bundleRig,
  dataApiLoginOf,
  expectLoginsReady,
  FUNCTION_SIDES,
  poisonOrder,
  quarantinedView,
  relayTicks,
} from '../helpers/bundles.js';
import { AMQP_URL, RABBITMQ_MANAGEMENT_URL } from '../helpers/services.js';

/**
 * Every function of the RabbitMQ (Amazon MQ) deployment run from the bundle `cdk synth` wrote,
 * wired by the synthesized template, against the real PostgreSQL (Data API endpoint, each
 * function as its side's login)
 * and the local RabbitMQ in a virtual host of this file's: migrations and the broker topology on
 * deploy, the HTTP API, the relay on its schedule event, both consumers behind their Amazon MQ
 * event sources (as the pipeline user of the mapping's BASIC_AUTH secret), and maintenance.
 */
describe('the RabbitMQ deployment, run from its bundles', () => {
  let f: BundleRig;
  let api: { url: string };
  let conn: ChannelModel;
  let management: RabbitManagement;
  const sources: RunningEventSource[] = [];
  const order = { orderId: '', eventId: '' };

  beforeAll(async () => {
    f = await bundleRig('rabbitmq', 'bundles_rmq');
    api = await f.deployment.startHttpApi();
    management = new RabbitManagement(RABBITMQ_MANAGEMENT_URL);
  }, 300_000);

  afterAll(async () => {
    for (const s of sources) await s.stop().catch(() => {});
    await conn?.close().catch(() => {});
    await f?.close();
  }, 60_000);

  const vhost = () => encodeURIComponent(f.vhost?.vhost as string);

  it("migrate on deploy: the inventory database, each service's schema in its own, and every side's login", async () => {
    expect(await f.deployment.customResource('Migrations', 'Create')).toMatchObject({
      status: 'SUCCESS',
      data: {
        ordersApplied: (await serviceMigrations('orders')).length,
        inventoryApplied: (await serviceMigrations('inventory')).length,
        inventoryCreated: true,
        logins: DB_SIDES.map((side) => f.pipeline.dbUsers[side]).join(','),
      },
    });
    await expectLoginsReady(f);
  });

  it("each function reaches the Data API as its side's login; broker-setup has no database", async () => {
    const ids = f.deployment.assembly.functions
      .map((fn) => fn.id)
      .filter((id) => id in FUNCTION_SIDES);
    expect(ids.sort()).toEqual([
      'broker-setup',
      'maintenance',
      'order-results-rabbitmq',
      'outbox-relay',
      'place-order',
      'reserve-inventory-rabbitmq',
    ]);
    for (const id of ids) {
      const side = FUNCTION_SIDES[id] as DbSide | 'none';
      expect(await dataApiLoginOf(f, id), id).toBe(
        side === 'none' ? undefined : f.pipeline.dbUsers[side],
      );
    }
  });

  it('broker-setup (Custom::BrokerTopology, as the administrator): topology and policies in the vhost, and the pipeline user with permissions there only', async () => {
    const created = await f.deployment.customResource('BrokerTopology', 'Create');
    expect(created).toMatchObject({
      status: 'SUCCESS',
      physicalResourceId: `broker-topology:${f.vhost?.vhost}`,
      data: { pipelineUser: f.pipeline.brokerUser },
    });
    const data = created.status === 'SUCCESS' ? created.data : {};
    expect(Number(data.queues)).toBeGreaterThan(5);
    expect(Number(data.policies)).toBeGreaterThan(5);
    const queue = await management.request<{ arguments: Record<string, unknown> }>(
      'GET',
      `/api/queues/${vhost()}/${encodeURIComponent(RABBITMQ_NAMES.inventoryQueue)}`,
    );
    expect(queue?.arguments['x-queue-type']).toBe('quorum');
    const policies = await management.request<
      { pattern: string; definition: Record<string, unknown> }[]
    >('GET', `/api/policies/${vhost()}`);
    const inventory = policies?.find((p) =>
      new RegExp(p.pattern).test(RABBITMQ_NAMES.inventoryQueue),
    );
    expect(inventory?.definition).toMatchObject({ 'delivery-limit': 10 });
    const permissions = await management.request<{ vhost: string }[]>(
      'GET',
      `/api/users/${encodeURIComponent(f.pipeline.brokerUser)}/permissions`,
    );
    expect(permissions?.map((p) => p.vhost)).toEqual([f.vhost?.vhost]);
    conn = await testConnection(f.vhost?.amqpUrl as string);
  });

  it('place-order behind the HTTP API routes commits the order and its outbox row', async () => {
    await f.inventoryDb.query("INSERT INTO stock (sku, available) VALUES ('SKU-R', 5)");
    const res = await fetch(`${api.url}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sku: 'SKU-R', quantity: 3 }),
    });
    expect(res.status).toBe(201);
    Object.assign(order, await res.json());
    const { rows } = await f.db.db.query('SELECT published_at FROM outbox WHERE id = $1', [
      order.eventId,
    ]);
    // one row (the relay it kicked may have published it already)
    expect(rows).toHaveLength(1);
  });

  it('place-order kicked the relay: one asynchronous invocation published to the broker (as the pipeline user) and marked the row, with no schedule running', async () => {
    await waitFor(
      async () => {
        const { rows } = await f.db.db.query('SELECT published_at FROM outbox WHERE id = $1', [
          order.eventId,
        ]);
        return rows[0]?.published_at !== null;
      },
      { timeoutMs: 30_000, message: 'the outbox row marked published' },
    );
    expect(await queueDepth(conn, RABBITMQ_NAMES.inventoryQueue)).toBe(1);
    // the audit tap took its copy as well
    expect(await queueDepth(conn, RABBITMQ_NAMES.auditQueue)).toBe(1);
    expect(f.deployment.asyncStats('outbox-relay').accepted).toBeGreaterThanOrEqual(1);
  });

  it('reserve-inventory-rabbitmq behind its Amazon MQ event source (queue, batch, window, BASIC_AUTH from the template): reservation, inbox row, result event; the batch acknowledged', async () => {
    const source = await startAmazonMqEventSource(f.deployment, 'reserve-inventory-rabbitmq', {
      amqpUrl: AMQP_URL,
      vhost: f.vhost?.vhost as string,
    });
    sources.push(source);
    expect(source.settings).toMatchObject({
      queue: RABBITMQ_NAMES.inventoryQueue,
      batchSize: 100,
      batchWindowMs: 500,
      functionTimeoutMs: 30_000,
    });
    await f.journal.waitForLine(order.eventId, 'acked', 1, 30_000);
    // in the inventory service's database
    const { rows } = await f.inventoryDb.query(
      `SELECT r.status, s.reserved,
              (SELECT count(*)::int FROM processed_messages p WHERE p.message_id = r.message_id) AS inbox,
              (SELECT array_agg(event_type) FROM inventory_outbox) AS results
         FROM reservations r JOIN stock s USING (sku) WHERE r.message_id = $1`,
      [order.eventId],
    );
    expect(rows).toEqual([
      { status: 'reserved', reserved: 3, inbox: 1, results: ['inventory.reserved'] },
    ]);
    await waitFor(async () => (await queueDepth(conn, RABBITMQ_NAMES.inventoryQueue)) === 0, {
      message: 'the batch acknowledged',
    });
    // the event source connected as the mapping's user, not the administrator (the management
    // API lists a new connection after its next stats refresh)
    await waitFor(
      async () =>
        (
          await management.request<{ user: string; vhost: string }[]>('GET', '/api/connections')
        )?.some((c) => c.vhost === f.vhost?.vhost && c.user === f.pipeline.brokerUser),
      { timeoutMs: 20_000, message: "a connection of the mapping's user in the vhost" },
    );
  });

  it('order-results-rabbitmq behind its event source: the order shows its reservation', async () => {
    sources.push(
      await startAmazonMqEventSource(f.deployment, 'order-results-rabbitmq', {
        amqpUrl: AMQP_URL,
        vhost: f.vhost?.vhost as string,
      }),
    );
    await waitFor(
      async () => {
        const { rows } = await f.db.db.query(
          'SELECT reservation_status FROM orders WHERE id = $1',
          [order.orderId],
        );
        return rows[0]?.reservation_status === 'reserved';
      },
      { timeoutMs: 30_000, message: 'the order shows its reservation' },
    );
    expect(await queueDepth(conn, RABBITMQ_NAMES.inventoryResultsQueue)).toBe(0);
  });

  it('a poison order.created: reserve-inventory-rabbitmq parks it and publishes its notice itself; the order shows quarantined', async () => {
    const { orderId, eventId, poison } = await poisonOrder(f);
    const ch = await conn.createConfirmChannel();
    ch.publish(
      RABBITMQ_NAMES.ordersExchange,
      'order.created',
      Buffer.from(JSON.stringify(poison)),
      {
        persistent: true,
        messageId: eventId,
        type: 'order.created',
        contentType: 'application/json',
      },
    );
    await ch.waitForConfirms();
    await ch.close();
    await quarantinedView(api.url, orderId);
    expect(await queueDepth(conn, RETRY_NAMES.parkingQueue)).toBe(1);
  });

  it('maintenance on its scheduled event deletes published outbox rows past their retention', async () => {
    const old = randomUUID();
    await f.db.db.query(
      `INSERT INTO outbox (id, event_type, schema_version, aggregate_type, aggregate_id,
                           aggregate_version, payload, producer, correlation_id, occurred_at, published_at)
       VALUES ($1::uuid, 'order.created', '1.0', 'order', $1::text, 1, '{}', 'test', 'old',
               now() - interval '30 days', now() - interval '30 days')`,
      [old],
    );
    const out = await f.deployment
      .fn('maintenance')
      .invokeOrThrow<
        Record<'orders' | 'inventory', { tables: Record<string, { deleted: number }> }>
      >(
        scheduledEvent({
          ruleArn: 'arn:aws:events:us-east-1:000000000000:rule/MaintenanceSchedule',
        }),
      );
    expect(out.orders.tables.outbox?.deleted).toBe(1);
  });

  it('a scheduled tick reads nothing from the database and publishes the queue metrics; once a sweep is due, it publishes what a lost kick left', async () => {
    const logged = f.logs.get('outbox-relay')?.length ?? 0;
    await relayTicks(f);
    // its report: the queue depths read from the management API (RabbitMQ 4 brokers vend none
    // per queue), on every tick
    const emf = (f.logs.get('outbox-relay') ?? [])
      .slice(logged)
      .filter((l) => l.includes('"_aws"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(
      emf.some(
        (m) => m.Queue === RABBITMQ_NAMES.inventoryQueue && typeof m.QueueDepth === 'number',
      ),
    ).toBe(true);
    // and that it could read them (the QueueMetricsUnavailable alarm's metric)
    expect(emf.some((m) => m.QueueMetricsAvailable === 1 && m.Queue === undefined)).toBe(true);
  }, 90_000);
});
