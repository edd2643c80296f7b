import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { newEnvelope } from '../../shared/envelope/envelope.js';
import { receiveAll, SQS_SERVERS } from '../helpers/sqs.js';
import { SqsInventoryBench } from '../helpers/sqsInventory.js';

const created = (sku: string, quantity: number) => {
  const orderId = randomUUID();
  return newEnvelope({
    type: 'order.created',
    aggregate: { type: 'order', id: orderId, version: 1 },
    data: { orderId, sku, quantity },
    correlationId: `c-${orderId.slice(0, 8)}`,
    producer: 'order-service',
  });
};

describe.each(SQS_SERVERS)('reserve inventory on SQS ($name): database down', (server) => {
  let b: SqsInventoryBench;
  afterEach(() => b?.close());

  it.each(['visibility', 'resend'] as const)(
    'database down longer than the budget (%s mode): delays follow the ladder, then parked; no hot loop',
    async (mode) => {
      b = await SqsInventoryBench.create(server, `sqs_dbdown_${mode}_${server.name}`, { mode });
      await b.stock('SKU-D', 10);
      const { db, proxy } = await b.proxiedDb();
      proxy.cut();
      const e = created('SKU-D', 1);
      await b.send(e);
      await b.trigger({ db, concurrency: 1 });
      await b.waitForLine(e.id, 'parked', 1, 30_000);
      const received = b.linesFor(e.id).filter((l) => l.step === 'received');
      expect(received.map((l) => l.attempt)).toEqual([0, 1, 2, 3]);
      const gaps = received.slice(1).map((l, i) => l.at - (received[i]?.at ?? 0));
      b.budget.ladderMs.forEach((delay, i) => {
        expect(gaps[i]).toBeGreaterThanOrEqual(delay - 100);
        expect(gaps[i]).toBeLessThan(delay + 2_500);
      });
      const parked = await receiveAll(b.client, b.queues.parkingUrl, (m) => m.length >= 1);
      // the diagnosis, packed into one attribute
      expect(
        JSON.parse(parked[0]?.MessageAttributes?.diagnosis?.StringValue ?? '{}'),
      ).toMatchObject({ reason: 'exhausted', errorClass: 'transient' });
      console.info(
        `${server.name} ${mode}: gaps ${gaps.join(', ')} ms for ladder ${b.budget.ladderMs.join(', ')}`,
      );
    },
  );

  it.each(['visibility', 'resend'] as const)(
    'database back before the budget ends (%s mode): processed once',
    async (mode) => {
      b = await SqsInventoryBench.create(server, `sqs_dbback_${mode}_${server.name}`, { mode });
      await b.stock('SKU-B', 10);
      const { db, proxy } = await b.proxiedDb();
      proxy.cut();
      const e = created('SKU-B', 2);
      await b.send(e);
      await b.trigger({ db, concurrency: 1 });
      await b.waitForLine(e.id, 'retry-scheduled');
      proxy.restore();
      await b.waitForLine(e.id, 'effect-committed', 1, 20_000);
      expect(await b.stockOf('SKU-B')).toEqual({ available: 10, reserved: 2 });
      expect(await b.inboxRows(e.id)).toBe(1);
      expect(b.linesFor(e.id).some((l) => l.step === 'parked')).toBe(false);
    },
  );
});
