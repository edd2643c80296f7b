import type { Context } from 'aws-lambda';
import { afterEach, describe, expect, it } from 'vitest';
import { TcpProxy } from '../../devkit/TcpProxy.js';
import { AmazonMqTrigger } from '../../devkit/triggers/amazonMqTrigger.js';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type { BatchReport, RunningConsumer } from '../../shared/index.js';
import { createLogger, DEFAULT_RETENTION } from '../../shared/index.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { SCHEMA_VERSION_HEADER } from '../../shared/transport/rabbitmq/constants.js';
import type { RabbitMQEvent, RabbitMqBackend } from '../../shared/transport/rabbitmq/index.js';
import { amazonMqLambdaHandler } from '../../shared/transport/rabbitmq/index.js';
import { InventoryRig, RIG_CONSUMER } from '../helpers/inventory.js';
import { amqpUrlVia } from '../helpers/rabbit.js';
import { AMQP_URL } from '../helpers/services.js';

describe('reserve-inventory-rabbitmq handler behind the Amazon MQ trigger emulation', () => {
  let b: InventoryRig;
  let trigger: RunningConsumer | undefined;
  afterEach(async () => {
    await trigger?.stop();
    trigger = undefined;
    await b?.close();
  });

  /**
   * The reserve function's handler on the backend's Amazon MQ driver (or on `copies`, another
   * backend of the same vhost, which then publishes the retry and park copies), behind the
   * trigger emulation, as `startConsumer` composes it, keeping a copy of every event it is
   * invoked with.
   */
  const start = async (db: PgDatabase, copies: RabbitMqBackend = b.backend) => {
    const events: RabbitMQEvent[] = [];
    const reports: BatchReport[] = [];
    const handler = amazonMqLambdaHandler({
      driver: copies.amazonMqDriver(b.handler(db), { journal: b.journal }),
      logger: createLogger('reserve-inventory-rabbitmq-test'),
    });
    const emulation = new AmazonMqTrigger(
      {
        broker: b.backend,
        handler: (event: RabbitMQEvent, context: Context) => {
          events.push(structuredClone(event));
          return handler(event, context).then((report) => {
            reports.push(report);
            return report;
          });
        },
      },
      {
        queue: RABBITMQ_NAMES.inventoryQueue,
        vhost: b.vhost.vhost,
        batchSize: 10,
        batchWindowMs: 300,
      },
    );
    await emulation.start();
    trigger = emulation;
    return { events, reports };
  };

  it('a mixed batch (good, poison, transient) → each message settled on its own', async () => {
    b = await InventoryRig.create('reserve_amazonmq_mixed');
    await b.stock('SKU-G', 10);
    await b.stock('SKU-T', 10);
    // A database session whose statements give up after 300 ms: the "transient" message waits on
    // a row lock held below and times out (SQLSTATE 57014), a transient error.
    const db = new PgDatabase({ connectionString: b.t.url, max: 2, statementTimeoutMillis: 300 });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = b.t.db.transaction(async (tx) => {
      await tx.query(`SELECT * FROM stock WHERE sku = 'SKU-T' FOR UPDATE`);
      locked();
      await held;
    });
    await isLocked;
    try {
      const { events, reports } = await start(db);
      const good = b.orderCreated('SKU-G', 1);
      const transient = b.orderCreated('SKU-T', 1);
      const poisonId = '5b0f6e1c-2a3d-4e5f-8a9b-0c1d2e3f4a5b';
      await b.publishRaw([
        { body: JSON.stringify(good), messageId: good.id, type: good.type, schemaVersion: '1.0' },
        { body: '{not-json', messageId: poisonId, type: 'order.created' },
        {
          body: JSON.stringify(transient),
          messageId: transient.id,
          type: transient.type,
          schemaVersion: '1.0',
        },
      ]);
      await b.waitForLine(transient.id, 'retry-scheduled');

      // one invocation with the three messages, in the exact event shape
      const first = events[0] as RabbitMQEvent;
      expect(first.eventSource).toBe('aws:rmq');
      const records =
        first.rmqMessagesByQueue[`${RABBITMQ_NAMES.inventoryQueue}::${b.vhost.vhost}`];
      expect(records?.map((r) => r.basicProperties.messageId)).toEqual([
        good.id,
        poisonId,
        transient.id,
      ]);
      expect(records?.[0]?.basicProperties.headers[SCHEMA_VERSION_HEADER]).toEqual({
        bytes: [...Buffer.from('1.0')],
      });
      expect(Buffer.from(records?.[0]?.data ?? '', 'base64').toString()).toBe(JSON.stringify(good));
      expect(records?.[0]?.redelivered).toBe(false);
      // the function returned the driver's report: all three settled inside the invocation
      // (the poison one parked, the transient one retried through a confirmed copy)
      await waitFor(() => reports.length >= 1);
      expect(reports[0]).toEqual({ messages: 3, acked: 3, retried: 1, parked: 1, returned: 0 });

      expect(await b.reservation(good.aggregate.id)).toMatchObject({ status: 'reserved' });
      await waitFor(async () => (await b.parkedCount()) === 1);
      expect((await b.parked())[0]?.diagnosis).toMatchObject({
        messageId: poisonId,
        reason: 'permanent',
      });
      expect(b.linesFor(transient.id).find((l) => l.step === 'retry-scheduled')?.reason).toMatch(
        /statement timeout/,
      );

      // the lock goes away: the retry copy comes back through the retry queue and is reserved
      release();
      await holder;
      await b.waitForLine(transient.id, 'effect-committed', 1, 15_000);
      expect(await b.reservation(transient.aggregate.id)).toMatchObject({ status: 'reserved' });
      expect(trigger?.stats.givenBack).toBe(0);
    } finally {
      release();
      await holder.catch(() => {});
      await db.close();
    }
  });

  it('database down → each message retried on the ladder by confirmed copies, the handler returns, then parked exhausted/transient', async () => {
    b = await InventoryRig.create('reserve_amazonmq_dbdown');
    await b.stock('SKU-A', 10);
    const { db, proxy } = await b.proxiedDb();
    const { reports } = await start(db);
    proxy.cut();
    const e1 = b.orderCreated('SKU-A', 1);
    const e2 = b.orderCreated('SKU-A', 2);
    await b.publish(e1, e2);

    // the budget's 3 retries, then the consumer parks both with its own diagnosis
    await waitFor(async () => (await b.parkedCount()) === 2, {
      timeoutMs: 30_000,
      message: 'both parked by the consumer',
    });
    const parked = await b.parked();
    for (const e of [e1, e2]) {
      expect(parked.find((p) => p.diagnosis.messageId === e.id)?.diagnosis).toMatchObject({
        reason: 'exhausted',
        errorClass: 'transient',
        attempts: TEST_RETRY_BUDGET.maxAttempts,
        consumer: RIG_CONSUMER,
      });
      // one retry copy per ladder step, with the step's delay (the test budget has no jitter)
      const retries = b.linesFor(e.id).filter((l) => l.step === 'retry-scheduled');
      expect(retries.map((l) => /\(in (\d+) ms\)/.exec(l.reason ?? '')?.[1])).toEqual(
        TEST_RETRY_BUDGET.ladderMs.map(String),
      );
      expect(retries.every((l) => l.outcome === 'transient')).toBe(true);
    }
    // every invocation returned normally: nothing was given back to the broker
    expect(trigger?.stats.givenBack).toBe(0);
    expect(b.lines.some((l) => l.step === 'abandoned')).toBe(false);
    expect(reports.length).toBeGreaterThanOrEqual(4);
    expect(reports.every((r) => r.returned === 0)).toBe(true);
    expect(reports.reduce((n, r) => n + r.retried, 0)).toBe(6);
    expect(reports.reduce((n, r) => n + r.parked, 0)).toBe(2);

    proxy.restore();
    expect(await b.stockOf('SKU-A')).toEqual({ available: 10, reserved: 0 });
    expect(await b.inboxRows(e1.id)).toBe(0);
    await waitFor(async () => (await b.depth(RABBITMQ_NAMES.inventoryQueue)) === 0);
  });

  it('database unreachable: the use case does not try the batch message by message, each gets the same retry', async () => {
    b = await InventoryRig.create('reserve_amazonmq_unreachable');
    const { db, proxy } = await b.proxiedDb();
    proxy.cut();
    const events = [1, 2, 3].map(() => b.orderCreated('SKU-U', 1));
    const before = proxy.refused;
    const outcomes = await b.useCase(db).process(
      events.map((e) => ({
        messageId: e.id,
        body: Buffer.from(JSON.stringify(e)),
        attempt: 0,
        redelivered: false,
      })),
    );
    // one connection attempt for the batch and one for the first message alone, not one each
    expect(proxy.refused - before).toBe(2);
    expect(outcomes).toHaveLength(3);
    for (const o of outcomes) {
      expect(o).toMatchObject({ kind: 'retry', attempt: 1, infrastructure: true });
    }
  });

  it('database down and the broker unreachable for the retry copy → the handler throws, the batch goes back, nothing lost', async () => {
    b = await InventoryRig.create('reserve_amazonmq_nocopy');
    await b.stock('SKU-B', 10);
    const { db, proxy: dbProxy } = await b.proxiedDb();
    // The retry copies go through a broker connection of their own, behind a proxy; the
    // trigger emulation keeps consuming on the direct one.
    const brokerProxy = await new TcpProxy(
      '127.0.0.1',
      Number(new URL(AMQP_URL).port || 5672),
    ).start();
    const copies = b.scratch.backend(
      'rabbitmq',
      {
        budget: TEST_RETRY_BUDGET,
        retention: DEFAULT_RETENTION,
        consumer: RIG_CONSUMER,
        topology: PIPELINE_TOPOLOGY,
      },
      {
        url: amqpUrlVia(brokerProxy.port, b.vhost.vhost),
        publish: { connectTimeoutMs: 500, confirmTimeoutMs: 1_000 },
        reconnect: { baseMs: 50, maxMs: 200 },
      },
    );
    try {
      const { reports } = await start(db, copies);
      dbProxy.cut();
      brokerProxy.cut();
      const e = b.orderCreated('SKU-B', 1);
      await b.publish(e);
      await waitFor(() => (trigger?.stats.givenBack ?? 0) >= 2, {
        timeoutMs: 20_000,
        message: 'failed invocations',
      });
      expect(b.linesFor(e.id).some((l) => l.step === 'retry-scheduled')).toBe(false);
      expect(b.lines.find((l) => l.step === 'abandoned')?.reason).toMatch(/cannot settle message/);
      expect(reports).toEqual([]); // no invocation returned
      expect(await b.parkedCount()).toBe(0);

      // the broker is back (the database still down): the ladder takes over
      brokerProxy.restore();
      await b.waitForLine(e.id, 'retry-scheduled', 1, 20_000);
      dbProxy.restore();
      await b.waitForLine(e.id, 'effect-committed', 1, 20_000);
      expect(await b.stockOf('SKU-B')).toEqual({ available: 10, reserved: 1 });
      expect(await b.inboxRows(e.id)).toBe(1);
    } finally {
      await brokerProxy.close();
    }
  });

  it('the broker connection drops during an invocation: the emulation survives the settle on the closed channel, and the batch comes back once', async () => {
    b = await InventoryRig.create('reserve_amazonmq_closed');
    await b.stock('SKU-C', 10);
    // The event source's connection goes through a proxy; the handler's copies do not.
    const brokerProxy = await new TcpProxy(
      '127.0.0.1',
      Number(new URL(AMQP_URL).port || 5672),
    ).start();
    const viaProxy = b.scratch.backend(
      'rabbitmq',
      {
        budget: TEST_RETRY_BUDGET,
        retention: DEFAULT_RETENTION,
        consumer: RIG_CONSUMER,
        topology: PIPELINE_TOPOLOGY,
      },
      { url: amqpUrlVia(brokerProxy.port, b.vhost.vhost), reconnect: { baseMs: 50, maxMs: 200 } },
    );
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => unhandled.push(err);
    process.on('unhandledRejection', onUnhandled);
    try {
      const handler = amazonMqLambdaHandler({
        driver: b.backend.amazonMqDriver(b.handler(b.t.db), { journal: b.journal }),
        logger: createLogger('reserve-inventory-rabbitmq-test'),
      });
      let invocations = 0;
      const emulation = new AmazonMqTrigger(
        {
          broker: viaProxy,
          handler: async (event: RabbitMQEvent, context: Context) => {
            invocations++;
            // the first invocation outlives its connection: settled on a closed channel
            if (invocations === 1) {
              brokerProxy.cut();
              await waitFor(() => brokerProxy.connections === 0, { message: 'the cut' });
              brokerProxy.restore();
            }
            return handler(event, context);
          },
        },
        { queue: RABBITMQ_NAMES.inventoryQueue, vhost: b.vhost.vhost, batchSize: 10 },
      );
      await emulation.start();
      trigger = emulation;
      const e = b.orderCreated('SKU-C', 1);
      await b.publish(e);
      // processed in the first invocation, whose ack could not be sent: delivered again after
      // the reconnect and recognised by the inbox
      await b.waitForLine(e.id, 'effect-committed', 1, 20_000);
      await waitFor(() => invocations >= 2, { timeoutMs: 20_000, message: 'the redelivery' });
      await b.waitForLine(e.id, 'acked', 2, 20_000);
      expect(b.linesFor(e.id).filter((l) => l.step === 'effect-committed')).toHaveLength(1);
      expect(await b.stockOf('SKU-C')).toEqual({ available: 10, reserved: 1 });
      expect(await b.inboxRows(e.id)).toBe(1);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await trigger?.stop();
      trigger = undefined;
      await viaProxy.close();
      await brokerProxy.close();
    }
  });
});
