import { afterEach, describe, expect, it } from 'vitest';
import { CONSUMER_HARNESSES } from '../helpers/consumerHarnesses.js';
import type { ConsumerBench } from '../helpers/inventory.js';

describe.each(CONSUMER_HARNESSES)('reserve inventory ($name): database down', (h) => {
  let b: ConsumerBench | undefined;
  afterEach(async () => {
    await b?.close();
    b = undefined;
  });

  it.each(h.retryModes)(
    'database down longer than the budget (%s): each retry after its ladder delay, then parked; no hot loop',
    async (retryMode) => {
      const bench = await h.setup('db_down', { retryMode });
      b = bench;
      await bench.stock('SKU-A', 10);
      const { db, proxy } = await bench.proxiedDb();
      await bench.start({ db, concurrency: 1 });
      proxy.cut();
      const e = bench.orderCreated('SKU-A', 1);
      await bench.publish(e);
      await bench.waitForLine(e.id, 'parked', 1, 30_000);

      const received = bench.linesFor(e.id).filter((l) => l.step === 'received');
      // first delivery + one per ladder step, no more: no hot loop
      expect(received.map((l) => l.attempt)).toEqual([0, 1, 2, 3]);
      const gaps = received.slice(1).map((l, i) => l.at - (received[i]?.at ?? 0));
      const { earlyMs, lateMs } = h.retryDelayTolerance;
      bench.budget.ladderMs.forEach((delay, i) => {
        expect(gaps[i]).toBeGreaterThanOrEqual(delay - earlyMs);
        expect(gaps[i]).toBeLessThan(delay + lateMs);
      });
      const parked = (await bench.parked()).find((p) => p.diagnosis.messageId === e.id);
      expect(parked?.diagnosis).toMatchObject({
        reason: 'exhausted',
        errorClass: 'transient',
        attempts: 3,
      });
      expect(parked?.diagnosis.error).toMatch(/TransientDbError/);
      proxy.restore();
      expect(await bench.reservation(e.aggregate.id)).toBeUndefined();
      expect((await bench.backend.inspect()).ready).toBe(0);
      console.info(
        `${h.name} ${retryMode}: retry delays ${gaps.join(', ')} ms for ladder ${bench.budget.ladderMs.join(', ')}`,
      );
    },
  );

  it.each(h.retryModes)(
    'database back before the budget ends (%s): processed once',
    async (retryMode) => {
      const bench = await h.setup('db_back', { retryMode });
      b = bench;
      await bench.stock('SKU-B', 10);
      const { db, proxy } = await bench.proxiedDb();
      await bench.start({ db, concurrency: 1 });
      proxy.cut();
      const e = bench.orderCreated('SKU-B', 2);
      await bench.publish(e);
      await bench.waitForLine(e.id, 'retry-scheduled');
      proxy.restore();
      await bench.waitForLine(e.id, 'effect-committed', 1, 20_000);
      // where the retry is a copy, the original was acked once the copy was confirmed
      await bench.waitForLine(e.id, 'acked', bench.retryComesBackAs === 'copy' ? 2 : 1);

      expect(await bench.reservation(e.aggregate.id)).toMatchObject({ status: 'reserved' });
      expect(await bench.stockOf('SKU-B')).toEqual({ available: 10, reserved: 2 });
      expect(await bench.inboxRows(e.id)).toBe(1);
      expect(await bench.parkedCount()).toBe(0);
      expect(bench.linesFor(e.id).some((l) => l.step === 'parked')).toBe(false);
      // the retry went to the consumer's queue only, never to a tap (RabbitMQ's audit.orders)
      if (bench.tapCopies) expect(await bench.tapCopies()).toBe(1);
    },
  );
});
