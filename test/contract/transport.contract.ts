import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import type {
  Backend,
  InboundMessage,
  MessageHandler,
  Outcome,
  Publisher,
  RunningConsumer,
} from '../../shared/index.js';
import { type Envelope, newEnvelope } from '../../shared/index.js';

/**
 * The transport contract (in the spirit of Watermill's universal pub/sub tests): what every
 * backend promises, written once. A backend's test file only supplies a rig factory and its
 * capability flags; each test gets fresh queues from the factory.
 */
export interface TransportFeatures {
  /** Messages with the same key (aggregate id) are delivered in publish order. */
  orderedPerKey: boolean;
  /** Tolerance for "retry later" delays (ms above the requested delay). */
  delayToleranceMs: number;
  /** A batch's records are settled one by one (checked against the backend's capability). */
  partialBatchResponse: boolean;
}

/**
 * One backend, prepared in an isolated namespace (vhost, queue prefix or its own memory), and a
 * way to start its consumer (worker or trigger emulation) around a handler.
 */
export interface TransportRig {
  backend: Backend;
  /** Publishes to a destination that does not exist. */
  missingDestination: Publisher;
  startConsumer(handler: MessageHandler): Promise<RunningConsumer>;
  close(): Promise<void>;
}

/** A delivery as the contract's consumer recorded it. */
export interface Received {
  messageId: string;
  attempt: number;
  redelivered: boolean;
  /** Times redriven from the parking lot, as the transport says (0: never). */
  redrives: number;
  at: number;
}

const envelope = (key = randomUUID(), version = 1): Envelope =>
  newEnvelope({
    type: version === 1 ? 'order.created' : 'order.cancelled',
    aggregate: { type: 'order', id: key, version },
    data: { orderId: key, sku: 'SKU-C', quantity: 1 },
    correlationId: `contract-${key.slice(0, 8)}`,
    producer: 'contract',
  });

const ack: Outcome = { kind: 'ack', result: 'noop' };

export function runTransportContract(options: {
  name: string;
  features: TransportFeatures;
  create: (label: string) => Promise<TransportRig>;
}): void {
  describe(`transport contract: ${options.name}`, () => {
    const rigs: TransportRig[] = [];
    const stops: (() => Promise<void>)[] = [];
    /** A fresh rig whose consumer records deliveries and answers with `decide`. */
    const setup = async (
      label: string,
      decide: (m: InboundMessage, seen: number) => Outcome | Promise<Outcome>,
    ) => {
      const h = await options.create(label);
      rigs.push(h);
      const deliveries: Received[] = [];
      const consumer = await h.startConsumer(async (messages) => {
        const outcomes: Outcome[] = [];
        for (const m of messages) {
          deliveries.push({
            messageId: m.messageId ?? '?',
            attempt: m.attempt,
            redelivered: m.redelivered,
            redrives: m.redrive?.count ?? 0,
            at: Date.now(),
          });
          outcomes.push(
            await decide(m, deliveries.filter((d) => d.messageId === m.messageId).length),
          );
        }
        return outcomes;
      });
      stops.push(() => consumer.stop());
      const of = (id: string) => deliveries.filter((d) => d.messageId === id);
      const publisher = h.backend.publisher('outbox');
      const parkingLot = h.backend.parkingLot();
      return { h, publisher, parkingLot, deliveries, of };
    };
    beforeAll(() => undefined);
    afterAll(async () => {
      for (const stop of stops) await stop();
      for (const h of rigs) await h.close();
    });

    it('declares the ordering it is tested for', async () => {
      const h = await options.create('features');
      rigs.push(h);
      expect(h.backend.capabilities.orderedPerKey).toBe(options.features.orderedPerKey);
      expect(h.backend.capabilities.partialBatchResponse).toBe(
        options.features.partialBatchResponse,
      );
    });

    it('a confirmed publish is delivered, with the envelope id as message id', async () => {
      const { publisher, of } = await setup('confirmed', () => ack);
      const sent = Array.from({ length: 15 }, () => envelope());
      const outcomes = await publisher.publish(sent);
      expect(outcomes.every((o) => o.ok)).toBe(true);
      await waitFor(() => sent.every((e) => of(e.id).length >= 1), { message: 'all delivered' });
    });

    it('a publish to a missing destination fails as unroutable, never as confirmed', async () => {
      const { h } = await setup('missing', () => ack);
      const outcomes = await h.missingDestination.publish([envelope(), envelope()]);
      expect(outcomes.map((o) => (o.ok ? 'ok' : o.reason))).toEqual(['unroutable', 'unroutable']);
    });

    it('when processing fails without an outcome (a crash), the message is delivered again', async () => {
      const { h, publisher, of } = await setup('crash', (_m, seen) => {
        if (seen === 1) throw new Error('consumer crashed');
        return ack;
      });
      const e = envelope();
      await publisher.publish([e]);
      await waitFor(() => of(e.id).length >= 2, { timeoutMs: 20_000, message: 'redelivered' });
      // the broker flags the copy where it can (redeliveryFlag), never the first delivery
      expect(of(e.id).map((d) => d.redelivered)).toEqual([
        false,
        h.backend.capabilities.redeliveryFlag,
      ]);
    });

    it('retry later honours the delay and counts the attempt', async () => {
      let delayMs = 1_000;
      const { h, publisher, of } = await setup('retry', (m, seen) =>
        seen === 1
          ? {
              kind: 'retry',
              delayMs,
              attempt: m.attempt + 1,
              errorClass: 'transient',
              error: 'try later',
              infrastructure: false,
            }
          : ack,
      );
      // any delay where the backend has per-message delays; otherwise one of its delay queues (a
      // step of the test budget's ladder)
      if (h.backend.capabilities.perMessageDelay) delayMs = 1_300;
      const e = envelope();
      await publisher.publish([e]);
      await waitFor(() => of(e.id).length >= 2, { timeoutMs: 15_000, message: 'delivered again' });
      const [first, second] = of(e.id) as [Received, Received];
      expect(second.at - first.at).toBeGreaterThanOrEqual(delayMs - 100);
      expect(second.at - first.at).toBeLessThan(delayMs + options.features.delayToleranceMs);
      expect(second.attempt).toBe(1);
    });

    it.skipIf(!options.features.partialBatchResponse)(
      'a batch settles record by record: one retried, the rest acknowledged once',
      async () => {
        const sent = Array.from({ length: 6 }, () => envelope());
        const failing = sent[2] as Envelope;
        const { h, publisher, of } = await setup('partial', (m, seen) =>
          m.messageId === failing.id && seen === 1
            ? {
                kind: 'retry',
                delayMs: 1_000,
                attempt: m.attempt + 1,
                errorClass: 'transient',
                error: 'one record fails',
                infrastructure: false,
              }
            : ack,
        );
        expect(h.backend.capabilities.partialBatchResponse).toBe(true);
        await publisher.publish(sent);
        await waitFor(() => of(failing.id).length >= 2, {
          timeoutMs: 15_000,
          message: 'the failed record delivered again',
        });
        for (const e of sent) {
          if (e.id !== failing.id) expect(of(e.id), e.id).toHaveLength(1);
        }
      },
    );

    it('park carries the diagnosis, and redrive brings the same id back with its attempts reset', async () => {
      const { publisher, parkingLot, of } = await setup('park', (_m, seen) =>
        seen === 1
          ? {
              kind: 'park',
              reason: 'permanent',
              errorClass: 'permanent',
              error: 'cannot process this',
            }
          : ack,
      );
      const e = envelope();
      await publisher.publish([e]);
      const parked = await waitFor(
        async () => (await parkingLot.list(10)).find((p) => p.diagnosis.messageId === e.id),
        { timeoutMs: 15_000, message: 'parked' },
      );
      expect(parked.diagnosis).toMatchObject({
        reason: 'permanent',
        errorClass: 'permanent',
        error: 'cannot process this',
      });
      const result = await parkingLot.redrive({ ids: [e.id] }, { rate: 50 });
      expect(result.moved).toEqual([e.id]);
      await waitFor(() => of(e.id).length >= 2, { timeoutMs: 15_000, message: 'redriven' });
      expect(of(e.id)[1]?.attempt).toBe(0);
    });

    it('a redriven message says so (count and time), and so does its diagnosis when parked again', async () => {
      const park: Outcome = {
        kind: 'park',
        reason: 'exhausted',
        errorClass: 'transient',
        error: 'still failing',
      };
      const { publisher, parkingLot, of } = await setup('redrive_count', (_m, seen) =>
        seen <= 2 ? park : ack,
      );
      const e = envelope();
      const before = Date.now();
      await publisher.publish([e]);
      const parkedOnce = async () =>
        (await parkingLot.list(10)).find((p) => p.diagnosis.messageId === e.id);
      const first = await waitFor(parkedOnce, { timeoutMs: 15_000, message: 'parked' });
      expect(first.diagnosis.redriveCount ?? 0).toBe(0);
      expect((await parkingLot.redrive({ ids: [e.id] })).moved).toEqual([e.id]);
      await waitFor(() => of(e.id).length >= 2, { timeoutMs: 15_000, message: 'redriven' });
      expect(of(e.id).map((d) => d.redrives)).toEqual([0, 1]);
      const second = await waitFor(
        async () => {
          const p = await parkedOnce();
          return p?.diagnosis.redriveCount === 1 ? p : undefined;
        },
        { timeoutMs: 15_000, message: 'parked again, redriven once' },
      );
      expect(second.diagnosis).toMatchObject({ reason: 'exhausted', errorClass: 'transient' });
      expect(Date.parse(second.diagnosis.lastRedriveAt ?? '')).toBeGreaterThanOrEqual(before);

      // at the redrive limit (REDRIVE_LIMIT, 1 by default): refused, it stays parked as it was
      const refused = await parkingLot.redrive({ ids: [e.id] });
      expect(refused).toMatchObject({ matched: 1, moved: [] });
      expect(refused.skipped).toEqual([
        {
          messageId: e.id,
          redriveCount: 1,
          reason: expect.stringContaining(
            'redrive limit 1 reached: the inbox retention covers 1 redrives; raise INBOX_RETENTION_MS and REDRIVE_LIMIT together',
          ),
        },
      ]);
      const still = await waitFor(parkedOnce, { timeoutMs: 15_000, message: 'still parked' });
      expect(still.diagnosis).toMatchObject({
        reason: 'exhausted',
        errorClass: 'transient',
        redriveCount: 1,
        lastRedriveAt: second.diagnosis.lastRedriveAt,
      });
      expect(of(e.id)).toHaveLength(2);

      // a limit of 2 lets it through
      const allowed = await parkingLot.redrive({ ids: [e.id] }, { redriveLimit: 2 });
      expect(allowed).toMatchObject({ moved: [e.id], skipped: [] });
      await waitFor(() => of(e.id).length >= 3, { timeoutMs: 15_000, message: 'redriven twice' });
      expect(of(e.id)[2]?.redrives).toBe(2);
    });

    it('reading the parking lot takes nothing out: back-to-back reads see every parked message', async () => {
      const reason: Outcome = {
        kind: 'park',
        reason: 'permanent',
        errorClass: 'permanent',
        error: 'parked for the read test',
      };
      const { h, parkingLot, publisher } = await setup('read', () => reason);
      const sent = [envelope(), envelope(), envelope()];
      await publisher.publish(sent);
      const ids = sent.map((e) => e.id).sort();
      const read = async () =>
        (await parkingLot.list(10)).map((p) => p.diagnosis.messageId ?? '').sort();
      await waitFor(async () => (await read()).length >= sent.length, {
        timeoutMs: 15_000,
        message: 'all three parked',
      });
      // More reads than RabbitMQ 4's default delivery limit (20): a read gives the messages back,
      // and each return counts as a delivery there.
      for (let i = 0; i < 25; i++) expect(await read(), `read ${i + 1}`).toEqual(ids);
      await waitFor(async () => (await h.backend.inspect()).parked >= sent.length, {
        message: 'inspect() counts the parked messages',
      });
    });

    it('inspect() counts the messages waiting for a consumer', async () => {
      const h = await options.create('inspect');
      rigs.push(h);
      await h.backend.publisher('outbox').publish([envelope(), envelope()]);
      const seen = await waitFor(
        async () => {
          const i = await h.backend.inspect();
          return i.ready === 2 ? i : undefined;
        },
        { message: 'two ready' },
      );
      expect(seen).toMatchObject({ ready: 2, inFlight: 0, parked: 0 });
    });

    it.skipIf(!options.features.orderedPerKey)(
      'messages with the same key arrive in publish order',
      async () => {
        const { publisher, deliveries } = await setup('ordered', () => ack);
        const key = randomUUID();
        const sent = [envelope(key, 1), envelope(key, 2), envelope(key, 3), envelope(key, 4)];
        for (const e of sent) await publisher.publish([e]);
        await waitFor(() => deliveries.length >= 4, { message: 'all four' });
        expect(deliveries.map((d) => d.messageId)).toEqual(sent.map((e) => e.id));
      },
    );
  });
}
