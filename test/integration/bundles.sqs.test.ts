import { randomUUID } from 'node:crypto';
import { GetQueueAttributesCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningEventSource, startSqsEventSource } from '../../devkit/lambda/eventSources.js';
import { scheduledEvent } from '../../devkit/triggers/scheduleTrigger.js';
import { waitFor } from '../../devkit/waitFor.js';
import { DB_SIDES, type DbSide } from '../../shared/pipeline/appRole.js';
import { serviceMigrations } from '../../shared/pipeline/schema.js';
import { createSqsClient } from '../../shared/transport/sqs/index.js';
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

/**
 * Every function of the SQS deployment run from the bundle `cdk synth` wrote, in a Lambda-shaped
 * Node 24 process, wired by the synthesized template (environment, event source mappings, HTTP
 * API routes, schedule, custom resource) against the real PostgreSQL (through the local Data API
 * endpoint, each function as its side's login, on its service's database) and the run's SQS
 * server: each step checked by its effects in the databases and the queues, in deployment order.
 */
describe('the SQS deployment, run from its bundles', () => {
  let f: BundleRig;
  let api: { url: string };
  let sqs: SQSClient;
  const sources: RunningEventSource[] = [];
  const order = { orderId: '', eventId: '' };

  beforeAll(async () => {
    f = await bundleRig('sqs', 'bundles_sqs');
    api = await f.deployment.startHttpApi();
    sqs = createSqsClient({ endpoint: f.deployment.sqsEndpoint, maxAttempts: 1 });
  }, 300_000);

  afterAll(async () => {
    for (const s of sources) await s.stop().catch(() => {});
    sqs?.destroy();
    await f?.close();
  }, 60_000);

  const depth = async (queue: string) => {
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: f.deployment.queue(queue).url,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    return (
      Number(Attributes?.ApproximateNumberOfMessages ?? 0) +
      Number(Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
    );
  };

  it("migrate (Custom::Migrations through the Provider framework): Create creates the inventory database, applies each service's schema to its own and creates the logins; Update is a no-op; Delete keeps the data", async () => {
    const created = await f.deployment.customResource('Migrations', 'Create');
    expect(created).toMatchObject({
      status: 'SUCCESS',
      physicalResourceId: 'schema-migrations',
      data: {
        ordersApplied: (await serviceMigrations('orders')).length,
        ordersSkipped: 0,
        inventoryApplied: (await serviceMigrations('inventory')).length,
        inventorySkipped: 0,
        inventoryCreated: true,
        logins: DB_SIDES.map((side) => f.pipeline.dbUsers[side]).join(','),
      },
    });
    const tablesOf = async (db: BundleRig['inventoryDb']) =>
      (
        await db.query<{ t: string }>(
          `SELECT table_name::text AS t FROM information_schema.tables
            WHERE table_schema = 'public' AND table_name <> 'schema_migrations' ORDER BY 1`,
        )
      ).rows.map((r) => r.t);
    expect(await tablesOf(f.db.db)).toEqual([
      'order_results_set_aside',
      'orders',
      'outbox',
      'processed_messages',
    ]);
    expect(await tablesOf(f.inventoryDb)).toEqual([
      'inventory_outbox',
      'processed_messages',
      'reservations',
      'stock',
    ]);
    await expectLoginsReady(f);
    expect(
      await f.deployment.customResource('Migrations', 'Update', {
        physicalResourceId: 'schema-migrations',
      }),
    ).toMatchObject({
      status: 'SUCCESS',
      data: { ordersApplied: 0, inventoryApplied: 0, inventoryCreated: false },
    });
    expect(
      await f.deployment.customResource('Migrations', 'Delete', {
        physicalResourceId: 'schema-migrations',
      }),
    ).toMatchObject({ status: 'SUCCESS', physicalResourceId: 'schema-migrations' });
    const { rows: still } = await f.db.db.query("SELECT to_regclass('public.orders') AS t");
    expect(still[0]).toEqual({ t: 'orders' });
  });

  it("each function reaches the Data API as its side's login (the user of its own secret)", async () => {
    const ids = f.deployment.assembly.functions
      .map((fn) => fn.id)
      .filter((id) => id in FUNCTION_SIDES);
    expect(ids.sort()).toEqual([
      'maintenance',
      'order-results-sqs',
      'outbox-relay',
      'place-order',
      'reserve-inventory-sqs',
    ]);
    for (const id of ids) {
      const side = FUNCTION_SIDES[id] as DbSide;
      expect(await dataApiLoginOf(f, id), id).toBe(f.pipeline.dbUsers[side]);
    }
  });

  it("place-order behind the template's HTTP API routes: POST /orders commits the order and its outbox row, as the orders login", async () => {
    await f.inventoryDb.query("INSERT INTO stock (sku, available) VALUES ('SKU-B', 10)");
    const res = await fetch(`${api.url}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-correlation-id': 'bundles-sqs' },
      body: JSON.stringify({ sku: 'SKU-B', quantity: 2 }),
    });
    expect(res.status).toBe(201);
    Object.assign(order, await res.json());
    const { rows } = await f.db.db.query(
      `SELECT o.status, x.id AS event, x.event_type, x.published_at, x.correlation_id
         FROM orders o JOIN outbox x ON x.id = o.created_event_id WHERE o.id = $1`,
      [order.orderId],
    );
    // (published_at: the relay it kicked may have published it already)
    expect(rows).toEqual([
      {
        status: 'placed',
        event: order.eventId,
        event_type: 'order.created',
        published_at: rows[0]?.published_at,
        correlation_id: 'bundles-sqs',
      },
    ]);
    // the Data API endpoint ran the function's calls as the user of its secret
    const { rows: sessions } = await f.db.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND usename = $2',
      [f.db.name, f.pipeline.dbUsers.orders],
    );
    expect(sessions[0]?.n).toBeGreaterThan(0);
    const get = await fetch(`${api.url}/orders/${order.orderId}`);
    expect(await get.json()).toMatchObject({
      orderId: order.orderId,
      reservation: { status: 'pending' },
    });
    expect((await fetch(`${api.url}/nothing`)).status).toBe(404);
  });

  it('place-order answers 503 with Retry-After: 5 while the cluster resumes from a pause', async () => {
    f.deployment.database.setResuming(true);
    try {
      const res = await fetch(`${api.url}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ sku: 'SKU-B', quantity: 1 }),
      });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
    } finally {
      f.deployment.database.setResuming(false);
    }
  });

  it('place-order kicked the relay: one asynchronous invocation published the order event to the source queue and marked the row, with no schedule running', async () => {
    await waitFor(
      async () => {
        const { rows } = await f.db.db.query('SELECT published_at FROM outbox WHERE id = $1', [
          order.eventId,
        ]);
        return rows[0]?.published_at !== null;
      },
      { timeoutMs: 30_000, message: 'the outbox row marked published' },
    );
    expect(await depth('inventory-orders')).toBe(1);
    // through Lambda's Invoke (InvocationType Event) on the local endpoint
    expect(f.deployment.asyncStats('outbox-relay').accepted).toBeGreaterThanOrEqual(1);
    expect(f.deployment.calls.counts()['lambda:Invoke']).toBeGreaterThanOrEqual(1);
  });

  it('reserve-inventory-sqs behind its SQS event source (batch, concurrency, partial batch responses from the template): reservation, inbox row and result event; the message deleted', async () => {
    const source = await startSqsEventSource(f.deployment, 'reserve-inventory-sqs');
    sources.push(source);
    expect(source.settings).toMatchObject({
      batchSize: 10,
      maxConcurrency: 5,
      reportBatchItemFailures: true,
      visibilityTimeoutSeconds: 180,
      functionTimeoutMs: 30_000,
    });
    await f.journal.waitForLine(order.eventId, 'acked', 1, 30_000);
    // in the inventory service's database
    const { rows } = await f.inventoryDb.query(
      `SELECT r.status, r.quantity, s.reserved,
              (SELECT count(*)::int FROM processed_messages p WHERE p.message_id = r.message_id) AS inbox,
              (SELECT array_agg(event_type) FROM inventory_outbox) AS results
         FROM reservations r JOIN stock s USING (sku) WHERE r.message_id = $1`,
      [order.eventId],
    );
    expect(rows).toEqual([
      { status: 'reserved', quantity: 2, reserved: 2, inbox: 1, results: ['inventory.reserved'] },
    ]);
    await waitFor(async () => (await depth('inventory-orders')) === 0, {
      message: 'the message deleted from the source queue',
    });
  });

  it('order-results-sqs behind its event source: the relay (still draining) sends the result, the order shows it', async () => {
    sources.push(await startSqsEventSource(f.deployment, 'order-results-sqs'));
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
    const get = await fetch(`${api.url}/orders/${order.orderId}`);
    expect(await get.json()).toMatchObject({ reservation: { status: 'reserved' } });
    expect(await depth('orders-inventory-results')).toBe(0);
  });

  it('a poison order.created: reserve-inventory-sqs parks it and publishes its notice through inventory’s topic itself; the order shows quarantined', async () => {
    const { orderId, eventId, poison } = await poisonOrder(f);
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: f.deployment.queue('inventory-orders').url,
        MessageBody: JSON.stringify(poison),
        MessageAttributes: {
          event_id: { DataType: 'String', StringValue: eventId },
          event_type: { DataType: 'String', StringValue: 'order.created' },
        },
      }),
    );
    await quarantinedView(api.url, orderId);
    expect(await depth('inventory-orders-parking')).toBe(1);
  });

  it("maintenance on its daily scheduled event deletes inbox and published outbox rows past their retention, in each service's database", async () => {
    const old = { orders: randomUUID(), inventory: randomUUID() };
    const dbs = { orders: f.db.db, inventory: f.inventoryDb };
    for (const service of ['orders', 'inventory'] as const) {
      await dbs[service].query(
        `INSERT INTO processed_messages (consumer_name, message_id, processed_at)
         VALUES ('old-consumer', $1, now() - interval '60 days')`,
        [old[service]],
      );
    }
    const out = await f.deployment
      .fn('maintenance')
      .invokeOrThrow<
        Record<'orders' | 'inventory', { tables: Record<string, { deleted: number }> }>
      >(
        scheduledEvent({
          ruleArn: 'arn:aws:events:us-east-1:000000000000:rule/MaintenanceSchedule',
        }),
      );
    for (const service of ['orders', 'inventory'] as const) {
      expect(out[service].tables.processed_messages?.deleted, service).toBe(1);
      const { rows } = await dbs[service].query(
        'SELECT count(*)::int AS n FROM processed_messages WHERE message_id = $1',
        [old[service]],
      );
      expect(rows[0], service).toEqual({ n: 0 });
    }
  });

  it('a scheduled tick with nothing left reads nothing from the database; once a sweep is due, it publishes what a lost kick left', async () => {
    await relayTicks(f);
  }, 90_000);
});
