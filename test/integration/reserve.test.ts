import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { encodeEnvelope, newEnvelope } from '../../shared/index.js';
import { CONSUMER_RIGS, inOrder } from '../helpers/consumerRigs.js';
import type { ConsumerRig } from '../helpers/inventory.js';

/** Journal steps of a message, in the order they happened. */
const stepsOf = (b: ConsumerRig, id: string) => b.linesFor(id).map((l) => l.step);

/**
 * The copies of an event published twice that reach the consumer: one where the broker drops a
 * second publish of one id within its deduplication window, else both.
 */
const deliveredOfTwo = (b: ConsumerRig) => (b.backend.capabilities.publishDeduplication ? 1 : 2);

/** Nothing of the event waits or is in flight: the broker stored no other copy. */
async function noOtherCopy(b: ConsumerRig) {
  expect(await b.backend.inspect()).toMatchObject({ ready: 0, inFlight: 0 });
}

describe.each(CONSUMER_RIGS)('reserve inventory ($name)', { concurrent: true }, (h) => {
  // One rig and one running consumer for the tests that only publish and read the outcome.
  let b: ConsumerRig;
  beforeAll(async () => {
    b = await h.setup('reserve');
    await b.start();
  });
  afterAll(() => b?.close());

  it('reserves stock once and acks only after the commit (journal order)', inOrder, async () => {
    await b.stock('SKU-A', 10);
    const e = b.orderCreated('SKU-A', 3);
    await b.publish(e);
    await b.waitForLine(e.id, 'acked');

    expect(await b.reservation(e.aggregate.id)).toMatchObject({
      status: 'reserved',
      order_version: 1,
    });
    expect(await b.stockOf('SKU-A')).toEqual({ available: 10, reserved: 3 });
    expect(await b.inboxRows(e.id)).toBe(1);
    expect(stepsOf(b, e.id)).toEqual(['received', 'effect-committed', 'acked']);
  });

  it(
    'an event whose id is written in upper case is reserved once, not taken for a duplicate',
    inOrder,
    async () => {
      await b.stock('SKU-U', 10);
      const created = b.orderCreated('SKU-U', 2);
      const e = { ...created, id: created.id.toUpperCase() };
      await b.publish(e, e);
      await b.waitForLine(e.id, 'acked', deliveredOfTwo(b));

      expect(await b.reservation(e.aggregate.id)).toMatchObject({ status: 'reserved' });
      expect(await b.stockOf('SKU-U')).toEqual({ available: 10, reserved: 2 });
      expect(stepsOf(b, e.id).filter((s) => s === 'effect-committed')).toHaveLength(1);
    },
  );

  it(
    'the same event published twice → one reservation, every delivered copy acked (settled, not redelivered), the second absorbed by the inbox or dropped by the broker; a tap got exactly the published copies',
    inOrder,
    async () => {
      await b.stock('SKU-B', 10);
      const tapBefore = await b.tapCopies?.();
      const e = b.orderCreated('SKU-B', 2);
      const copies = deliveredOfTwo(b);
      await b.publish(e, e);
      await b.waitForLine(e.id, 'acked', copies);

      expect(await b.stockOf('SKU-B')).toEqual({ available: 10, reserved: 2 });
      expect(await b.inboxRows(e.id)).toBe(1);
      expect(
        stepsOf(b, e.id)
          .filter((s) => s !== 'received')
          .sort(),
      ).toEqual(
        copies === 2
          ? ['acked', 'acked', 'duplicate', 'effect-committed']
          : ['acked', 'effect-committed'],
      );
      if (copies === 1) await noOtherCopy(b);
      if (b.tapCopies) expect(await b.tapCopies()).toBe((tapBefore ?? 0) + 2);
    },
  );

  it(
    'out of stock → exactly one inventory.reservation_rejected even when published twice; not parked',
    inOrder,
    async () => {
      await b.stock('SKU-C', 1);
      const e = b.orderCreated('SKU-C', 5);
      const copies = deliveredOfTwo(b);
      await b.publish(e, e);
      await b.waitForLine(e.id, 'acked', copies);
      if (copies === 1) await noOtherCopy(b);

      expect(await b.reservation(e.aggregate.id)).toMatchObject({
        status: 'rejected',
        reason: 'out_of_stock',
      });
      expect(await b.stockOf('SKU-C')).toEqual({ available: 1, reserved: 0 });
      const { rows } = await b.t.db.query<{
        event_type: string;
        causation_id: string;
        payload: unknown;
      }>('SELECT event_type, causation_id, payload FROM inventory_outbox WHERE aggregate_id = $1', [
        e.aggregate.id,
      ]);
      expect(rows).toEqual([
        {
          event_type: 'inventory.reservation_rejected',
          causation_id: e.id,
          payload: {
            orderId: e.aggregate.id,
            sku: 'SKU-C',
            quantity: 5,
            reason: 'out_of_stock',
            available: 1,
          },
        },
      ]);
      expect(stepsOf(b, e.id)).not.toContain('parked');
    },
  );

  it(
    'poison messages are parked at once with a diagnosis: zero retries, never redelivered',
    inOrder,
    async () => {
      const before = await b.parkedCount();
      const mark = b.lines.length; // the consumer is idle: every line from here is one of these four
      const unknownVersion = b.orderCreated('SKU-A', 1, { schema_version: '9.0' });
      const missingId = b.orderCreated('SKU-A', 1);
      const badData = b.orderCreated('SKU-A', 1);
      (badData.data as Record<string, unknown>).quantity = 'lots';
      const notJsonId = '0f2b7c3e-5d1a-4c8e-9b6f-1a2b3c4d5e6f';
      await b.publishRaw([
        { body: '{not-json', messageId: notJsonId, type: 'order.created' },
        { body: encodeEnvelope(missingId), type: 'order.created' },
        {
          body: encodeEnvelope(unknownVersion),
          messageId: unknownVersion.id,
          type: 'order.created',
          schemaVersion: '9.0',
        },
        { body: encodeEnvelope(badData), messageId: badData.id, type: 'order.created' },
      ]);
      await waitFor(async () => (await b.parkedCount()) === before + 4, {
        message: 'four parked',
        // a parking queue's approximate count on moto can lag under load
        timeoutMs: 45_000,
      });

      const parked = await b.parked(100);
      const byId = (id: string | null) =>
        parked.find((p) => p.diagnosis.messageId === id)?.diagnosis;
      expect(byId(notJsonId)).toMatchObject({
        reason: 'permanent',
        errorClass: 'permanent',
        attempts: 0,
        type: 'order.created',
        consumer: 'inventory@test',
      });
      expect(byId(notJsonId)?.error).toMatch(/not valid JSON/);
      expect(byId(notJsonId)?.error).not.toContain('not-json'); // never the payload
      expect(byId(null)).toMatchObject({ reason: 'permanent' });
      expect(byId(null)?.error).toMatch(/no message id/);
      expect(byId(unknownVersion.id)).toMatchObject({ reason: 'permanent', schemaVersion: '9.0' });
      expect(byId(unknownVersion.id)?.error).toMatch(/major 9 is not supported/);
      expect(byId(badData.id)?.error).toMatch(/data\.quantity/);
      // each received once and settled: parked at once, zero retries, not redelivered
      const steps = () => b.lines.slice(mark).map((l) => l.step);
      await waitFor(() => steps().filter((s) => s === 'acked').length === 4, {
        message: 'four acked',
      });
      expect(steps().filter((s) => s === 'received')).toHaveLength(4);
      expect(steps()).not.toContain('retry-scheduled');
      expect((await b.backend.inspect()).ready).toBe(0);
    },
  );

  it(
    'ordering: order.cancelled (v2) before order.created (v1) → final state by the policy',
    inOrder,
    async () => {
      await b.stock('SKU-D', 10);
      const created = b.orderCreated('SKU-D', 4);
      const cancelled = b.orderCancelled(created);
      await b.publish(cancelled);
      await b.waitForLine(cancelled.id, 'retry-scheduled'); // deferred: predecessor missing
      await b.publish(created);
      await b.waitForLine(cancelled.id, 'effect-committed');
      // the deferred original, then its retry: both acked where the retry is a copy
      await b.waitForLine(cancelled.id, 'acked', b.retryComesBackAs === 'copy' ? 2 : 1);

      expect(await b.reservation(created.aggregate.id)).toMatchObject({
        status: 'released',
        order_version: 2,
      });
      expect(await b.stockOf('SKU-D')).toEqual({ available: 10, reserved: 0 });
      const deferred = b.linesFor(cancelled.id).find((l) => l.step === 'deferred');
      expect(deferred).toMatchObject({ outcome: 'retry', reason: 'missing predecessor' });
      // a stale copy of v1 arriving after v2 changes nothing
      const staleCopy = { ...created, id: '7d1d3b0e-2c55-4b8e-8f43-8e2f9a1b7c60' };
      await b.publish(staleCopy);
      await b.waitForLine(staleCopy.id, 'acked');
      expect(b.linesFor(staleCopy.id).find((l) => l.step === 'effect-committed')).toMatchObject({
        outcome: 'stale',
      });
      expect(await b.stockOf('SKU-D')).toEqual({ available: 10, reserved: 0 });
    },
  );

  it(
    'a cancel naming another sku than its reservation → parked permanent with a diagnosis, stock and reservation untouched',
    inOrder,
    async () => {
      await b.stock('SKU-M1', 10);
      await b.stock('SKU-M2', 10);
      const created = b.orderCreated('SKU-M1', 3);
      await b.publish(created);
      await b.waitForLine(created.id, 'effect-committed');
      const cancelled = newEnvelope({
        type: 'order.cancelled',
        aggregate: { type: 'order', id: created.aggregate.id, version: 2 },
        data: { orderId: created.aggregate.id, sku: 'SKU-M2', quantity: 3 },
        correlationId: created.correlation_id,
        producer: 'order-service',
      });
      await b.publish(cancelled);
      await b.waitForLine(cancelled.id, 'parked');
      const parked = (await b.parked(100)).find((p) => p.diagnosis.messageId === cancelled.id);
      expect(parked?.diagnosis).toMatchObject({ reason: 'permanent', errorClass: 'permanent' });
      expect(parked?.diagnosis.error).toMatch(
        /order\.cancelled names sku SKU-M2 but order .* was recorded with sku SKU-M1/,
      );
      // not applied: the reservation still holds its units on SKU-M1, nothing moved on SKU-M2
      expect(await b.reservation(created.aggregate.id)).toMatchObject({
        status: 'reserved',
        order_version: 1,
      });
      expect(await b.stockOf('SKU-M1')).toEqual({ available: 10, reserved: 3 });
      expect(await b.stockOf('SKU-M2')).toEqual({ available: 10, reserved: 0 });
      // the claim was undone: a redrive after the fix is decided again, not taken for a duplicate
      expect(await b.inboxRows(cancelled.id)).toBe(0);
    },
  );

  it(
    'a v2 whose v1 never comes is parked as missing predecessor after the age limit',
    inOrder,
    async () => {
      const created = b.orderCreated('SKU-E', 1);
      const cancelled = {
        ...b.orderCancelled(created),
        // 56 s old with a 60 s age limit: one or two deferrals fit, then it must be parked
        occurred_at: new Date(Date.now() - 56_000).toISOString(),
      };
      await b.publish(cancelled);
      await b.waitForLine(cancelled.id, 'parked');
      const parked = (await b.parked(100)).find((p) => p.diagnosis.messageId === cancelled.id);
      expect(parked?.diagnosis).toMatchObject({
        reason: 'missing_predecessor',
        errorClass: 'deferred',
      });
      expect(await b.reservation(created.aggregate.id)).toBeUndefined();
      expect(await b.inboxRows(cancelled.id)).toBe(0);
    },
  );
});

describe.each(CONSUMER_RIGS)(
  'reserve inventory, a whole batch ($name)',
  { concurrent: true },
  (h) => {
    // A rig of its own: the consumer starts on messages already waiting, with settings of its own.
    let b: ConsumerRig | undefined;
    afterEach(async () => {
      await b?.close();
      b = undefined;
    });

    it(
      'a batch of 10 with mixed outcomes: only the failed records come back',
      inOrder,
      async () => {
        const rig = await h.setup('mixed_batch');
        b = rig;
        await rig.stock('SKU-M', 100);
        const good = Array.from({ length: 7 }, () => rig.orderCreated('SKU-M', 1));
        // v2 without v1: deferred
        const early = Array.from({ length: 3 }, () =>
          rig.orderCancelled(rig.orderCreated('SKU-M', 1)),
        );
        await rig.publish(...good, ...early);
        await rig.start({ concurrency: 1, batchWindowMs: 0 });
        for (const e of early) await rig.waitForLine(e.id, 'received', 2, 15_000);
        for (const e of good)
          expect(rig.linesFor(e.id).filter((l) => l.step === 'received')).toHaveLength(1);
        for (const e of early) {
          const received = rig.linesFor(e.id).filter((l) => l.step === 'received');
          expect(received[1]?.redelivered).toBe(rig.retryComesBackAs === 'redelivery');
          expect(received[1]?.attempt).toBe(1);
        }
        expect(await rig.stockOf('SKU-M')).toEqual({ available: 100, reserved: 7 });
      },
    );
  },
);
