import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import {
  RABBITMQ_NAMES,
  RETRY_NAMES,
  retryQueueName,
} from '../../shared/transport/rabbitmq/index.js';
import { InventoryBench } from '../helpers/inventory.js';

describe('reserve inventory on RabbitMQ: database and broker faults', () => {
  let b: InventoryBench;
  afterEach(() => b?.close());

  it('database down longer than the budget: each retry queue in order, with its delay, then parked', async () => {
    b = await InventoryBench.create('reserve_db_down');
    await b.stock('SKU-A', 10);
    const { db, proxy } = await b.proxiedDb();
    await b.worker({ db });
    proxy.cut();
    const e = b.orderCreated('SKU-A', 1);
    await b.publish(e);
    await b.waitForLine(e.id, 'parked', 1, 30_000);

    const received = b.linesFor(e.id).filter((l) => l.step === 'received');
    // first delivery + one per ladder step, no more: no hot requeue loop
    expect(received.map((l) => l.attempt)).toEqual([0, 1, 2, 3]);
    const gaps = received.slice(1).map((l, i) => l.at - (received[i]?.at ?? 0));
    b.budget.ladderMs.forEach((delay, i) => {
      expect(gaps[i]).toBeGreaterThanOrEqual(delay - 50);
      expect(gaps[i]).toBeLessThan(delay + 1_500);
    });
    const parked = (await b.parked()).find((p) => p.diagnosis.messageId === e.id);
    expect(parked?.diagnosis).toMatchObject({
      reason: 'exhausted',
      errorClass: 'transient',
      attempts: 3,
    });
    expect(parked?.diagnosis.error).toMatch(/TransientDbError/);
    proxy.restore();
    expect(await b.reservation(e.aggregate.id)).toBeUndefined();
    expect(await b.depth(RABBITMQ_NAMES.inventoryQueue)).toBe(0);
    console.info(
      `measured retry delays (ms): ${gaps.join(', ')} for ladder ${b.budget.ladderMs.join(', ')}`,
    );
  });

  it('database back before the budget ends: processed once', async () => {
    b = await InventoryBench.create('reserve_db_back');
    await b.stock('SKU-A', 10);
    const { db, proxy } = await b.proxiedDb();
    await b.worker({ db });
    proxy.cut();
    const e = b.orderCreated('SKU-A', 2);
    await b.publish(e);
    await b.waitForLine(e.id, 'retry-scheduled');
    proxy.restore();
    await b.waitForLine(e.id, 'effect-committed', 1, 15_000);
    await b.waitForLine(e.id, 'acked', 2);

    expect(await b.reservation(e.aggregate.id)).toMatchObject({ status: 'reserved' });
    expect(await b.stockOf('SKU-A')).toEqual({ available: 10, reserved: 2 });
    expect(await b.inboxRows(e.id)).toBe(1);
    expect(await b.parkedCount()).toBe(0);
    // the retry copy went to inventory.orders only, never to audit.orders
    expect(await b.depth(RABBITMQ_NAMES.auditQueue)).toBe(1);
  });

  it('retry binding removed: the retry publish is returned, the original is not acked, reconnects are bounded', async () => {
    b = await InventoryBench.create('reserve_retry_unbound');
    await b.stock('SKU-A', 10);
    const first = retryQueueName(b.budget.ladderMs[0] as number);
    await b.backend.withChannel((ch) =>
      ch.unbindQueue(first, RETRY_NAMES.retryExchange, String(b.budget.ladderMs[0])),
    );
    const { db, proxy } = await b.proxiedDb();
    const worker = await b.worker({ db });
    proxy.cut();
    const e = b.orderCreated('SKU-A', 1);
    await b.publish(e);

    const started = Date.now();
    await waitFor(
      () =>
        b.linesFor(e.id).filter((l) => l.step === 'abandoned' || l.step === 'received').length >= 6,
      {
        timeoutMs: 20_000,
        message: 'several give-ups',
      },
    );
    const elapsed = Date.now() - started;
    expect(b.linesFor(e.id).some((l) => l.step === 'acked')).toBe(false);
    // backoff 100 ms → 1 s (jittered): far fewer reconnects than a hot loop would make
    expect(worker.reconnects).toBeGreaterThanOrEqual(2);
    expect(worker.reconnects).toBeLessThanOrEqual(Math.ceil(elapsed / 50));
    const receivedSoFar = b.linesFor(e.id).filter((l) => l.step === 'received').length;
    expect(receivedSoFar).toBeLessThanOrEqual(worker.reconnects + 1); // one delivery per reconnect

    // fix both causes: the message was never lost and is processed once
    await b.backend.withChannel((ch) =>
      ch.bindQueue(first, RETRY_NAMES.retryExchange, String(b.budget.ladderMs[0])),
    );
    proxy.restore();
    await b.waitForLine(e.id, 'effect-committed', 1, 20_000);
    expect(await b.reservation(e.aggregate.id)).toMatchObject({ status: 'reserved' });
    expect(await b.inboxRows(e.id)).toBe(1);
  });
});
