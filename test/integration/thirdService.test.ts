import { type ChildProcess, spawn } from 'node:child_process';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { DEFAULT_RETENTION, newEnvelope, OutboxRelay, OutboxStore } from '../../shared/index.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { type RabbitMqBackend, rabbitmqModule } from '../../shared/transport/rabbitmq/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { packLibrary, ROOT, runIn, scratchProject, TSC } from '../helpers/packedLibrary.js';
import { createTestVhost, type TestVhost } from '../helpers/rabbit.js';

/**
 * Another team's service, as docs/use-in-your-service.md builds it: `examples/shipping` copied
 * into an empty project that installs the packed library (and zod) from the tarball, compiled
 * there and run with plain node. It reads `inventory.reserved` through a queue of its own, beside
 * the order side's queue on the same stream, applies its effect in its own database and
 * publishes its own event through its own outbox.
 */
const ORDERS = 5;
const OBSERVER = 'observer.shipping';

describe("a second team's service, built from the packed library", () => {
  let work: string;
  let app: string;
  let vhost: TestVhost;
  let inventory: TestDatabase;
  let shipping: TestDatabase;
  let upstream: RabbitMqBackend;
  let service: ChildProcess | undefined;
  let output = '';

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'rms-shipping-'));
    app = join(work, 'shipping');
    const { tarball } = await packLibrary(work);
    // the guide's install: the tarball, the schema library it uses, Node's types
    const zod = (await import('../../package.json', { with: { type: 'json' } })).default
      .dependencies.zod;
    await scratchProject(app, [tarball, `zod@${zod}`, '@types/node@24']);
    for (const part of ['src', 'migrations', 'tsconfig.json']) {
      await cp(join(ROOT, 'examples', 'shipping', part), join(app, part), { recursive: true });
    }
    const built = await runIn(app, TSC, ['-p', 'tsconfig.json']);
    expect(built.output).toBe('');

    vhost = await createTestVhost('shipping');
    inventory = await createTestDatabase('shipping_inventory');
    shipping = await createTestDatabase('shipping_own', { migrated: false });
    // the example's side of the stream: its exchanges and the order side's results queue
    upstream = rabbitmqModule.create({
      url: vhost.amqpUrl,
      managementUrl: vhost.managementUrl,
      vhost: vhost.vhost,
      budget: TEST_RETRY_BUDGET,
      retention: DEFAULT_RETENTION,
      consumer: 'upstream@test',
      topology: PIPELINE_TOPOLOGY,
    });
    await upstream.prepare('consume');
    // a consumer of the shipping events of its own (another team again)
    await upstream.withChannel(async (ch) => {
      await ch.assertExchange('shipping', 'topic', { durable: true });
      await ch.assertQueue(OBSERVER, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
      await ch.bindQueue(OBSERVER, 'shipping', 'shipping.#');
    });
  }, 240_000);

  afterAll(async () => {
    if (service && service.exitCode === null) service.kill('SIGKILL');
    await upstream?.close();
    await shipping?.drop();
    await inventory?.drop();
    await vhost?.delete();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('schedules each reserved order once, though inventory published it twice; both subscribers got every event', async () => {
    service = spawn(process.execPath, [join('dist', 'main.js')], {
      cwd: app,
      env: {
        ...process.env,
        DATABASE_URL: shipping.url,
        AMQP_URL: vhost.amqpUrl,
        RABBITMQ_MANAGEMENT_URL: vhost.managementUrl,
        RETRY_LADDER_MS: TEST_RETRY_BUDGET.ladderMs.join(','),
      },
    });
    service.stdout?.on('data', (b: Buffer) => {
      output += b.toString();
    });
    service.stderr?.on('data', (b: Buffer) => {
      output += b.toString();
    });
    await waitFor(() => output.includes('shipping: ready') || service?.exitCode !== null, {
      timeoutMs: 60_000,
      message: 'the shipping service ready',
    });
    expect(output, output).toContain('shipping: ready');

    // inventory's outbox: one `inventory.reserved` per order, relayed, then published again
    const reserved = Array.from({ length: ORDERS }, (_, i) => {
      const orderId = crypto.randomUUID();
      return newEnvelope({
        type: 'inventory.reserved',
        aggregate: { type: 'order', id: orderId, version: 1 },
        data: { orderId, sku: `SKU-${i}`, quantity: i + 1 },
        producer: 'inventory-service',
        correlationId: `order-${i}`,
      });
    });
    const outbox = new OutboxStore('inventory_outbox');
    await inventory.db.transaction(async (tx) => outbox.appendMany(tx, reserved));
    const relay = new OutboxRelay(
      { db: inventory.db, publisher: upstream.publisher('inventory_outbox') },
      { table: 'inventory_outbox', batchSize: 100, maxAttempts: 3 },
    );
    await relay.drain({ budgetMs: 30_000, idleWaitMs: 50, stopWhenIdle: true });
    const again = await upstream.publisher('inventory_outbox').publish(reserved);
    expect(again.every((o) => o.ok)).toBe(true);

    const count = async (sql: string) =>
      Number((await shipping.db.query<{ n: string }>(sql)).rows[0]?.n);
    await waitFor(
      async () =>
        (await count(
          'SELECT count(*) AS n FROM shipping_outbox WHERE published_at IS NOT NULL',
        )) === ORDERS,
      { timeoutMs: 60_000, message: `${ORDERS} shipping events published` },
    );
    expect(await count('SELECT count(*) AS n FROM shipments')).toBe(ORDERS);
    expect(
      (await shipping.db.query<{ order_id: string }>('SELECT order_id FROM shipments')).rows
        .map((r) => r.order_id)
        .sort(),
    ).toEqual(reserved.map((e) => e.aggregate.id).sort());
    expect(
      await count("SELECT count(*) AS n FROM processed_messages WHERE consumer_name = 'shipping'"),
    ).toBe(ORDERS);

    // the other subscribers: the order side's results queue got both copies, the observer each
    // shipping event once
    const depth = (queue: string) =>
      upstream.withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount);
    await waitFor(async () => (await depth(OBSERVER)) === ORDERS, {
      timeoutMs: 30_000,
      message: `${ORDERS} shipping events at the observer`,
    });
    expect(await depth(RABBITMQ_NAMES.inventoryResultsQueue)).toBe(2 * ORDERS);

    const exited = new Promise<number | null>((resolve) => service?.once('exit', resolve));
    service.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(output).toContain('shipping: stopped');
  });
});
