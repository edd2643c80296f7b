import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEV_TEMPLATES_TIMEOUT_MS, devTemplates, runDev } from '../helpers/child.js';
import { CONSUMER_RIGS, inOrder } from '../helpers/consumerRigs.js';
import type { ConsumerRig } from '../helpers/inventory.js';

describe.each(CONSUMER_RIGS)(
  'reserve inventory ($name): database down, consumer process killed',
  { concurrent: true },
  (h) => {
    let b: ConsumerRig | undefined;
    // the killed consumer is an `npm run dev` process, which reads its settings from the templates
    beforeAll(() => devTemplates('rabbitmq', 'sqs'), DEV_TEMPLATES_TIMEOUT_MS);
    afterEach(async () => {
      await b?.close();
      b = undefined;
    });

    it.each(h.retryModes)(
      'database down longer than the budget (%s): each retry after its ladder delay, then parked; no hot loop',
      inOrder,
      async (retryMode) => {
        const rig = await h.setup('db_down', { retryMode });
        b = rig;
        await rig.stock('SKU-A', 10);
        const { db, proxy } = await rig.proxiedDb();
        await rig.start({ db, concurrency: 1 });
        proxy.cut();
        const e = rig.orderCreated('SKU-A', 1);
        await rig.publish(e);
        await rig.waitForLine(e.id, 'parked', 1, 30_000);

        const received = rig.linesFor(e.id).filter((l) => l.step === 'received');
        // first delivery + one per ladder step, no more: no hot loop
        expect(received.map((l) => l.attempt)).toEqual([0, 1, 2, 3]);
        const gaps = received.slice(1).map((l, i) => l.at - (received[i]?.at ?? 0));
        const { earlyMs, lateMs } = h.retryDelayTolerance;
        rig.budget.ladderMs.forEach((delay, i) => {
          expect(gaps[i]).toBeGreaterThanOrEqual(delay - earlyMs);
          expect(gaps[i]).toBeLessThan(delay + lateMs);
        });
        const parked = (await rig.parked()).find((p) => p.diagnosis.messageId === e.id);
        expect(parked?.diagnosis).toMatchObject({
          reason: 'exhausted',
          errorClass: 'transient',
          attempts: 3,
        });
        expect(parked?.diagnosis.error).toMatch(/TransientDbError/);
        proxy.restore();
        expect(await rig.reservation(e.aggregate.id)).toBeUndefined();
        expect((await rig.backend.inspect()).ready).toBe(0);
        console.info(
          `${h.name} ${retryMode}: retry delays ${gaps.join(', ')} ms for ladder ${rig.budget.ladderMs.join(', ')}`,
        );
      },
    );

    it.each(h.retryModes)(
      'database back before the budget ends (%s): processed once',
      inOrder,
      async (retryMode) => {
        const rig = await h.setup('db_back', { retryMode });
        b = rig;
        await rig.stock('SKU-B', 10);
        const { db, proxy } = await rig.proxiedDb();
        await rig.start({ db, concurrency: 1 });
        proxy.cut();
        const e = rig.orderCreated('SKU-B', 2);
        await rig.publish(e);
        await rig.waitForLine(e.id, 'retry-scheduled');
        proxy.restore();
        await rig.waitForLine(e.id, 'effect-committed', 1, 20_000);
        // where the retry is a copy, the original was acked once the copy was confirmed
        await rig.waitForLine(e.id, 'acked', rig.retryComesBackAs === 'copy' ? 2 : 1);

        expect(await rig.reservation(e.aggregate.id)).toMatchObject({ status: 'reserved' });
        expect(await rig.stockOf('SKU-B')).toEqual({ available: 10, reserved: 2 });
        expect(await rig.inboxRows(e.id)).toBe(1);
        expect(await rig.parkedCount()).toBe(0);
        expect(rig.linesFor(e.id).some((l) => l.step === 'parked')).toBe(false);
        // the retry went to the consumer's queue only, never to a tap (RabbitMQ's audit.orders)
        if (rig.tapCopies) expect(await rig.tapCopies()).toBe(1);
      },
    );

    it(
      'reserve.after-commit:exit in a consumer process → the message comes again → reserved once, one inbox row',
      inOrder,
      async () => {
        // what a killed consumer held comes again after 6 s where a lease holds it (SQS, JetStream)
        const rig = await h.setup('crash_commit', { visibilityTimeoutSeconds: 6 });
        b = rig;
        await rig.stock('SKU-A', 10);
        const e = rig.orderCreated('SKU-A', 3);
        await rig.publish(e);
        const child = await runDev(['--transport', rig.backend.transport, '--role', 'consumer'], {
          FAULTS: 'reserve.after-commit:exit',
          ...rig.devEnv(),
        });
        expect(child.signal, child.stderr).toBe('SIGKILL');
        // the child's own journal lines: committed, never acknowledged
        expect(child.journal.filter((j) => j.messageId === e.id).map((j) => j.step)).toEqual([
          'received',
          'effect-committed',
        ]);
        expect(await rig.stockOf('SKU-A')).toEqual({ available: 10, reserved: 3 });

        // the consumer as deployed (no fault): the message comes again, the inbox absorbs it
        await rig.start();
        await rig.waitForLine(e.id, 'acked', 1, 20_000);
        const again = rig.linesFor(e.id);
        expect(again.map((l) => l.step)).toEqual(['received', 'duplicate', 'acked']);
        expect(again[0]?.redelivered).toBe(rig.backend.capabilities.redeliveryFlag);
        expect(await rig.stockOf('SKU-A')).toEqual({ available: 10, reserved: 3 });
        expect(await rig.inboxRows(e.id)).toBe(1);
      },
    );
  },
);
