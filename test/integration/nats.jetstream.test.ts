import { randomUUID } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { NATS_URL } from '../../devkit/transports/nats.js';
import { waitFor } from '../../devkit/waitFor.js';
import type { InboundMessage, MessageHandler, Outcome } from '../../shared/index.js';
import { DEFAULT_RETENTION, newEnvelope, type RetryBudget } from '../../shared/index.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { createBackend } from '../../shared/transport/index.js';
import type { NatsBackend } from '../../shared/transport/nats/index.js';
import { natsRig } from '../contract/rigs.js';
import type { TransportRig } from '../contract/transport.contract.js';

const envelope = () => {
  const key = randomUUID();
  return newEnvelope({
    type: 'order.created',
    aggregate: { type: 'order', id: key, version: 1 },
    data: { orderId: key, sku: 'SKU-N', quantity: 1 },
    correlationId: `nats-${key.slice(0, 8)}`,
    producer: 'nats-test',
  });
};

const ack: Outcome = { kind: 'ack', result: 'noop' };

/** A budget of one retry within 150 ms: two deliveries, so a MaxDeliver of 3 is allowed. */
const TINY_BUDGET: RetryBudget = { ladderMs: [100], maxAttempts: 1, maxAgeMs: 150, jitter: 0 };

describe('NATS JetStream backend', () => {
  const rigs: TransportRig[] = [];
  const stops: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const stop of stops) await stop();
    for (const h of rigs) await h.close();
  });

  const setup = async (label: string, settings = {}) => {
    const h = await natsRig(label, settings);
    rigs.push(h);
    return { h, backend: h.backend as NatsBackend };
  };

  const consume = async (h: TransportRig, decide: (m: InboundMessage) => Outcome) => {
    const seen: InboundMessage[] = [];
    const handler: MessageHandler = async (messages) =>
      messages.map((m) => {
        seen.push(m);
        return decide(m);
      });
    const consumer = await h.startConsumer(handler);
    stops.push(() => consumer.stop());
    return { seen, consumer };
  };

  it('the duplicate window drops a second publish of one id; a redrive of that id is delivered', async () => {
    const { h, backend } = await setup('dedup');
    const e = envelope();
    const publisher = backend.publisher('outbox');
    expect(await publisher.publish([e])).toEqual([{ id: e.id, ok: true }]);
    // the relay's second try of a message whose ack it missed: confirmed, not stored again
    expect(await publisher.publish([e])).toEqual([{ id: e.id, ok: true, duplicate: true }]);
    expect(await backend.inspect()).toMatchObject({ ready: 1, inFlight: 0, parked: 0 });

    const { seen } = await consume(h, (m) =>
      m.redrive
        ? ack
        : { kind: 'park', reason: 'permanent', errorClass: 'permanent', error: 'parked' },
    );
    const lot = backend.parkingLot();
    await waitFor(async () => (await lot.list(10)).some((p) => p.diagnosis.messageId === e.id), {
      message: 'parked',
    });
    expect((await lot.redrive({ ids: [e.id] })).moved).toEqual([e.id]);
    await waitFor(() => seen.length >= 2, { message: 'the redrive delivered' });
    expect(seen.map((m) => [m.messageId, m.redrive?.count ?? 0])).toEqual([
      [e.id, 0],
      [e.id, 1],
    ]);
    await waitFor(async () => (await backend.inspect()).inFlight === 0, { message: 'settled' });
    expect(await backend.inspect()).toMatchObject({ ready: 0, parked: 0, undeliverable: 0 });
  });

  it('a message past MaxDeliver is not parked by the broker: JetStream only stops delivering it', async () => {
    const { h, backend } = await setup('max_deliver', { budget: TINY_BUDGET, maxDeliver: 3 });
    const { seen } = await consume(h, () => {
      throw new Error('the handler crashes on this message');
    });
    const e = envelope();
    await backend.publisher('outbox').publish([e]);
    const held = await waitFor(
      async () => {
        const i = await backend.inspect();
        return i.undeliverable === 1 && i.inFlight === 0 ? i : undefined;
      },
      { message: 'held past MaxDeliver' },
    );
    expect(held).toMatchObject({ ready: 0, inFlight: 0, parked: 0, undeliverable: 1 });
    expect(seen.map((m) => [m.attempt, m.redelivered])).toEqual([
      [0, false],
      [1, true],
      [2, true],
    ]);
    expect(await backend.parkingLot().list(10)).toEqual([]);
  });

  it('a MaxDeliver within the retry budget is refused: the consumer must park first', () => {
    expect(() =>
      createBackend('nats-jetstream', {
        servers: NATS_URL,
        budget: TINY_BUDGET,
        retention: DEFAULT_RETENTION,
        topology: PIPELINE_TOPOLOGY,
        consumer: 'test',
        maxDeliver: 2,
      }),
    ).toThrow(/maxDeliver: 2 deliveries do not cover the retry budget's 2/);
  });

  it('a consumer deleted under a running worker is declared again, and consuming goes on', async () => {
    const { h, backend } = await setup('redeclare');
    const { seen, consumer } = await consume(h, () => ack);
    const first = envelope();
    await backend.publisher('outbox').publish([first]);
    await waitFor(() => seen.some((m) => m.messageId === first.id), { message: 'first delivered' });

    const nc = await connect({ servers: NATS_URL });
    try {
      const jsm = await jetstreamManager(nc);
      const { stream, name } = await waitFor(async () => {
        for await (const s of jsm.streams.names()) {
          if (s.endsWith('ORDERS') && s.includes('redeclare')) {
            for await (const c of jsm.consumers.list(s)) return { stream: s, name: c.name };
          }
        }
        return undefined;
      });
      await jsm.consumers.delete(stream, name);
    } finally {
      await nc.close();
    }
    const second = envelope();
    await backend.publisher('outbox').publish([second]);
    await waitFor(() => seen.some((m) => m.messageId === second.id), {
      timeoutMs: 30_000,
      message: 'delivered after the consumer was declared again',
    });
    expect((consumer as typeof consumer & { reconnects: number }).reconnects).toBeGreaterThan(0);
  });
});
