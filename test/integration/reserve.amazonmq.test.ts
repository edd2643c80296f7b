import type { Context } from 'aws-lambda';
import { afterEach, describe, expect, it } from 'vitest';
import { AmazonMqTrigger } from '../../devkit/triggers/amazonMqTrigger.js';
import { waitFor } from '../../devkit/waitFor.js';
import { createReserveInventoryRabbitHandler } from '../../functions/reserve-inventory-rabbitmq/handler.js';
import type { BatchReport } from '../../shared/consumer/driver.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import { createLogger } from '../../shared/logger.js';
import {
  RABBITMQ_NAMES,
  type RabbitMQEvent,
  SCHEMA_VERSION_HEADER,
} from '../../shared/transport/rabbitmq/index.js';
import type { RunningConsumer } from '../../shared/transport/types.js';
import { InventoryBench } from '../helpers/inventory.js';

describe('reserve-inventory-rabbitmq handler behind the Amazon MQ trigger emulation', () => {
  let b: InventoryBench;
  let trigger: RunningConsumer | undefined;
  afterEach(async () => {
    await trigger?.stop();
    trigger = undefined;
    await b?.close();
  });

  /**
   * The reserve function's handler on the backend's Amazon MQ driver, behind the trigger
   * emulation, as `startConsumer` composes it, keeping a copy of every event it is invoked with.
   */
  const start = async (db: PgDatabase) => {
    const events: RabbitMQEvent[] = [];
    const reports: BatchReport[] = [];
    const handler = createReserveInventoryRabbitHandler({
      driver: b.backend.amazonMqDriver(b.handler(db), { journal: b.journal }),
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
    b = await InventoryBench.create('reserve_amazonmq_mixed');
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

  it('database down → the handler throws, the whole batch is requeued, later processed once', async () => {
    b = await InventoryBench.create('reserve_amazonmq_dbdown');
    await b.stock('SKU-A', 10);
    const { db, proxy } = await b.proxiedDb();
    trigger = await b.trigger({ db });
    proxy.cut();
    const e1 = b.orderCreated('SKU-A', 1);
    const e2 = b.orderCreated('SKU-A', 2);
    await b.publish(e1, e2);
    await waitFor(() => (trigger?.stats.givenBack ?? 0) >= 2, { message: 'failed invocations' });
    expect(b.linesFor(e1.id).some((l) => l.step === 'retry-scheduled')).toBe(false); // no per-message retry
    expect(await b.parkedCount()).toBe(0);

    proxy.restore();
    await b.waitForLine(e1.id, 'effect-committed', 1, 30_000);
    await b.waitForLine(e2.id, 'effect-committed', 1, 30_000);
    expect(await b.stockOf('SKU-A')).toEqual({ available: 10, reserved: 3 });
    expect(await b.inboxRows(e1.id)).toBe(1);
    expect(await b.inboxRows(e2.id)).toBe(1);
    await waitFor(async () => (await b.depth(RABBITMQ_NAMES.inventoryQueue)) === 0);
    // redeliveries were marked as such
    expect(
      b
        .linesFor(e1.id)
        .filter((l) => l.step === 'received')
        .at(-1)?.redelivered,
    ).toBe(true);
  });
});
