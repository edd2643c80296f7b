import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { SqsTriggerConfigError, validateVisibility } from '../../devkit/triggers/sqsTrigger.js';
import { waitFor } from '../../devkit/waitFor.js';
import { setFaults } from '../../shared/config/faults.js';
import { newEnvelope } from '../../shared/envelope/envelope.js';
import { receiveAll, SQS_SERVERS } from '../helpers/sqs.js';
import { SqsInventoryBench } from '../helpers/sqsInventory.js';

const created = (sku: string, quantity: number, version = 1) => {
  const orderId = randomUUID();
  return newEnvelope({
    type: version === 1 ? 'order.created' : 'order.cancelled',
    aggregate: { type: 'order', id: orderId, version },
    data: { orderId, sku, quantity },
    correlationId: `c-${orderId.slice(0, 8)}`,
    producer: 'order-service',
  });
};

describe.each(SQS_SERVERS)(
  'reserve inventory behind the SQS trigger emulation ($name)',
  (server) => {
    let b: SqsInventoryBench;
    afterEach(async () => {
      setFaults('');
      await b?.close();
    });

    it('reserves once; the same event sent twice is absorbed by the inbox; succeeded records are deleted', async () => {
      b = await SqsInventoryBench.create(server, `sqs_happy_${server.name}`);
      await b.stock('SKU-A', 10);
      const e = created('SKU-A', 3);
      await b.trigger();
      await b.send(e, e);
      await b.waitForLine(e.id, 'acked', 2);
      expect(await b.stockOf('SKU-A')).toEqual({ available: 10, reserved: 3 });
      expect(await b.inboxRows(e.id)).toBe(1);
      expect(
        b
          .linesFor(e.id)
          .map((l) => l.step)
          .filter((s) => s !== 'received')
          .sort(),
      ).toEqual(['acked', 'acked', 'duplicate', 'effect-committed'].sort());
    });

    it('poison messages are parked at once with a diagnosis and never redelivered', async () => {
      b = await SqsInventoryBench.create(server, `sqs_poison_${server.name}`);
      await b.trigger();
      const notJson = randomUUID();
      const unknownVersion = { ...created('SKU-A', 1), schema_version: '7.0' };
      await b.sendRaw([
        { body: '{not-json', messageId: notJson, type: 'order.created' },
        { body: JSON.stringify(created('SKU-A', 1)), type: 'order.created' }, // no event id attribute
        {
          body: JSON.stringify(unknownVersion),
          messageId: unknownVersion.id,
          type: 'order.created',
          schemaVersion: '7.0',
        },
      ]);
      const parked = await receiveAll(b.client, b.queues.parkingUrl, (m) => m.length >= 3);
      const byId = (id: string | undefined) =>
        parked.find((m) => m.MessageAttributes?.event_id?.StringValue === id);
      // the diagnosis, packed into one attribute
      const diagnosis = (id: string | undefined) =>
        JSON.parse(byId(id)?.MessageAttributes?.diagnosis?.StringValue ?? '{}') as Record<
          string,
          string
        >;
      expect(diagnosis(notJson).reason).toBe('permanent');
      expect(diagnosis(notJson).error).toMatch(/not valid JSON/);
      expect(diagnosis(notJson).consumer).toBe('inventory@test');
      expect(diagnosis(unknownVersion.id).error).toMatch(/major 7 is not supported/);
      expect(diagnosis(undefined).error).toMatch(/no message id/);
      // each was received once: parked at once, zero retries, not redelivered
      await waitFor(() => b.lines.filter((l) => l.step === 'acked').length === 3);
      expect(b.lines.filter((l) => l.step === 'received')).toHaveLength(3);
      expect(b.lines.some((l) => l.step === 'retry-scheduled')).toBe(false);
    });

    it('a batch of 10 with mixed outcomes: only the failed records come back', async () => {
      b = await SqsInventoryBench.create(server, `sqs_mixed_${server.name}`);
      await b.stock('SKU-M', 100);
      const good = Array.from({ length: 7 }, () => created('SKU-M', 1));
      const early = Array.from({ length: 3 }, () => created('SKU-M', 1, 2)); // v2 without v1: deferred
      await b.send(...good, ...early);
      await b.trigger({ concurrency: 1, batchWindowMs: 0 });
      for (const e of early) await b.waitForLine(e.id, 'received', 2, 15_000);
      for (const e of good)
        expect(b.linesFor(e.id).filter((l) => l.step === 'received')).toHaveLength(1);
      for (const e of early) {
        const received = b.linesFor(e.id).filter((l) => l.step === 'received');
        expect(received[1]?.redelivered).toBe(true);
        expect(received[1]?.attempt).toBe(1);
      }
      expect(await b.stockOf('SKU-M')).toEqual({ available: 100, reserved: 7 });
    });

    it('a handler that throws leaves the whole batch: every record comes back after its visibility timeout', async () => {
      b = await SqsInventoryBench.create(server, `sqs_throw_${server.name}`);
      await b.stock('SKU-T', 100);
      const batch = Array.from({ length: 10 }, () => created('SKU-T', 1));
      await b.send(...batch);
      setFaults('reserve.after-commit:throw'); // committed, then the invocation fails
      const trigger = await b.trigger({ concurrency: 1 });
      await waitFor(() => trigger.stats.givenBack >= 1);
      setFaults('');
      for (const e of batch) await b.waitForLine(e.id, 'duplicate', 1, 20_000);
      for (const e of batch) expect(await b.inboxRows(e.id)).toBe(1);
      expect(await b.stockOf('SKU-T')).toEqual({ available: 100, reserved: 10 });
    });
  },
);

describe('SQS trigger configuration', () => {
  it('refuses a visibility timeout under 6 × the function timeout', () => {
    expect(() => validateVisibility(30, 6_000)).toThrow(SqsTriggerConfigError);
    expect(() => validateVisibility(36, 6_000)).not.toThrow();
  });
});
