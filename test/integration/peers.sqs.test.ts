import { randomUUID } from 'node:crypto';
import {
  GetQueueAttributesCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createScratch, type ScratchEnvironment } from '../../devkit/scratch.js';
import { waitFor } from '../../devkit/waitFor.js';
import {
  effectCounts,
  ensurePeerSchema,
  type OrderCreated,
  parseOrderCreated,
  reserveEffect,
} from '../../peers/effect.js';
import { powertoolsPeer, powertoolsPeerWith } from '../../peers/powertools.js';
import { sqsConsumerPeer, sqsConsumerPeerWith } from '../../peers/sqsConsumer.js';
import type { PeerConsumer, PeerDelivery, RunningPeer } from '../../peers/types.js';
import { type Envelope, Journal, type JournalEntry, newEnvelope } from '../../shared/index.js';
import { setStock } from '../../shared/inventory/stock.js';
import { createSqsClient } from '../../shared/transport/sqs/index.js';
import { SERVICES } from '../helpers/services.js';
import { receiveAll, SQS_SERVERS } from '../helpers/sqs.js';

const server =
  SQS_SERVERS.find((s) => s.name === 'fauxqs') ?? (SQS_SERVERS[0] as (typeof SQS_SERVERS)[number]);
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const MAX_DELIVERIES = 3;

const created = (): Envelope => {
  const orderId = randomUUID();
  return newEnvelope({
    type: 'order.created',
    aggregate: { type: 'order', id: orderId, version: 1 },
    data: { orderId, sku: 'SKU-P', quantity: 1 },
    correlationId: orderId,
    producer: 'order-service',
  });
};

/** A peer running on a scratch database and queues of its own, with its journal collected. */
class PeerRig {
  private constructor(
    private readonly scratch: ScratchEnvironment,
    readonly client: SQSClient,
    readonly running: RunningPeer,
    /** The peer's journal lines, in order. */
    readonly lines: JournalEntry[],
  ) {}

  static async start(
    peer: PeerConsumer,
    label: string,
    /** Runs before the effect (e.g. to throw); the effect is `reserveEffect`. */
    before?: (event: OrderCreated, delivery: PeerDelivery) => void,
  ): Promise<PeerRig> {
    const scratch = await createScratch({ ...SERVICES, sqsEndpoint: server.endpoint }, label, {
      transports: ['sqs'],
    });
    const db = scratch.database.db;
    await ensurePeerSchema(db);
    await setStock(db, 'SKU-P', 1_000_000);
    const client = createSqsClient({ endpoint: server.endpoint, region: 'us-east-1' });
    const journal = new Journal();
    const lines: JournalEntry[] = [];
    journal.addSink((e) => lines.push(e));
    let running: RunningPeer;
    try {
      running = await peer.start({
        namespace: scratch.sqsPrefix,
        db,
        databaseUrl: scratch.database.url,
        sqs: { client, endpoint: server.endpoint, region: 'us-east-1' },
        redisUrl: REDIS_URL,
        concurrency: 2,
        batchSize: 10,
        maxDeliveries: MAX_DELIVERIES,
        journal,
        handle: async (body, delivery) => {
          const event = parseOrderCreated(body);
          before?.(event, delivery);
          await reserveEffect(db, peer.id, event);
        },
      });
    } catch (err) {
      client.destroy();
      await scratch.close();
      throw err;
    }
    return new PeerRig(scratch, client, running, lines);
  }

  get queueUrl(): string {
    return this.running.input.kind === 'sqs' ? this.running.input.queueUrl : '';
  }

  get deadLetterQueueUrl(): string {
    return this.running.input.kind === 'sqs' ? (this.running.input.deadLetterQueueUrl ?? '') : '';
  }

  async send(...envelopes: Envelope[]): Promise<void> {
    for (let i = 0; i < envelopes.length; i += 10) {
      const out = await this.client.send(
        new SendMessageBatchCommand({
          QueueUrl: this.queueUrl,
          Entries: envelopes
            .slice(i, i + 10)
            .map((e, k) => ({ Id: String(k), MessageBody: JSON.stringify(e) })),
        }),
      );
      if (out.Failed?.length) throw new Error(`send failed: ${out.Failed[0]?.Message}`);
    }
  }

  /** Sends a raw body; returns its SQS message id. */
  async sendRaw(body: string): Promise<string> {
    const out = await this.client.send(
      new SendMessageCommand({ QueueUrl: this.queueUrl, MessageBody: body }),
    );
    return out.MessageId as string;
  }

  effects = () => effectCounts(this.scratch.database.db);

  async effectsOf(eventId: string): Promise<number> {
    const { rows } = await this.scratch.database.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM peer_effects WHERE event_id = $1',
      [eventId],
    );
    return rows[0]?.n ?? 0;
  }

  /** Messages in the queue, visible or in flight. */
  async depth(): Promise<number> {
    const { Attributes } = await this.client.send(
      new GetQueueAttributesCommand({
        QueueUrl: this.queueUrl,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    return (
      Number(Attributes?.ApproximateNumberOfMessages ?? 0) +
      Number(Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
    );
  }

  steps(step: JournalEntry['step'], messageId?: string): JournalEntry[] {
    return this.lines.filter((l) => l.step === step && (!messageId || l.messageId === messageId));
  }

  async close(): Promise<void> {
    try {
      await this.running.stop();
    } finally {
      this.client.destroy();
      await this.scratch.close();
    }
  }
}

const PEERS = [
  {
    name: 'powertools',
    peer: powertoolsPeer,
    // Lambda's rule: visibility ≥ 6 × the function timeout, so 1 s → 6 s
    quick: powertoolsPeerWith({ functionTimeoutMs: 1_000, visibilityTimeoutSeconds: 6 }),
  },
  {
    name: 'sqs-consumer',
    peer: sqsConsumerPeer,
    // its `visibilityTimeout` option
    quick: sqsConsumerPeerWith({ visibilityTimeoutSeconds: 2 }),
  },
];

describe.each(PEERS)('peer $name on SQS', ({ name, peer, quick }) => {
  let rig: PeerRig | undefined;
  afterEach(async () => {
    await rig?.close();
    rig = undefined;
  });

  it('applies 50 order.created events once each and drains the queue', async () => {
    rig = await PeerRig.start(peer, `peer_${name}_50`);
    const events = Array.from({ length: 50 }, created);
    await rig.send(...events);
    const r = rig;
    await waitFor(async () => (await r.effects()).distinct === 50, {
      timeoutMs: 30_000,
      message: '50 distinct effects',
    });
    await waitFor(async () => (await r.depth()) === 0, { message: 'the queue drained' });
    await waitFor(() => r.steps('acked').length >= 50, { message: '50 acked journal lines' });
    expect(await rig.effects()).toEqual({ effects: 50, distinct: 50, appliedTwice: 0 });
    expect(new Set(rig.steps('received').map((l) => l.messageId)).size).toBe(50);
  });

  describe('with a short visibility timeout', () => {
    let quickRig: PeerRig;
    const throwOnce = new Set<string>();
    beforeAll(async () => {
      quickRig = await PeerRig.start(quick, `peer_${name}_quick`, (event, delivery) => {
        if (throwOnce.has(event.id) && delivery.attempt === 1) throw new Error('transient failure');
      });
    });
    afterAll(async () => {
      await quickRig?.close();
    });

    it('a handler that throws on the first attempt: the message is retried and applied once', async () => {
      const flaky = created();
      const steady = created();
      throwOnce.add(flaky.id);
      await quickRig.send(flaky, steady);
      await waitFor(async () => (await quickRig.effectsOf(flaky.id)) === 1, {
        timeoutMs: 20_000,
        message: 'the failed message retried and applied',
      });
      await waitFor(async () => (await quickRig.depth()) === 0, { message: 'the queue drained' });
      expect(await quickRig.effectsOf(flaky.id)).toBe(1);
      expect(await quickRig.effectsOf(steady.id)).toBe(1);
      const attempts = quickRig.lines
        .filter((l) => l.step === 'received' && l.attempt > 1)
        .map((l) => l.attempt);
      expect(attempts).toEqual([2]); // only the flaky message came back, once
    });

    it(`a poison body ends in the dead-letter queue after ${MAX_DELIVERIES} deliveries`, async () => {
      const messageId = await quickRig.sendRaw('{not json');
      const parked = await receiveAll(
        quickRig.client,
        quickRig.deadLetterQueueUrl,
        (m) => m.length >= 1,
        30_000,
      );
      expect(parked.map((m) => m.Body)).toEqual(['{not json']);
      expect(quickRig.steps('received', messageId)).toHaveLength(MAX_DELIVERIES);
      expect(quickRig.steps('acked', messageId)).toHaveLength(0);
    });
  });
});

describe('peer powertools: idempotency', () => {
  let rig: PeerRig | undefined;
  afterAll(async () => {
    await rig?.close();
  });

  it('the same event sent twice is applied once (the second is a duplicate in Redis)', async () => {
    rig = await PeerRig.start(powertoolsPeer, 'peer_powertools_twice');
    const r = rig;
    const e = created();
    await r.send(e);
    await waitFor(async () => (await r.effectsOf(e.id)) === 1, {
      message: 'the first copy applied',
    });
    await waitFor(() => r.steps('acked').length === 1, { message: 'the first copy deleted' });
    await r.send(e); // a second SQS message with the same envelope (a new SQS message id)
    await waitFor(() => r.steps('acked').length === 2, { message: 'the second copy deleted' });
    const duplicates = r.steps('duplicate');
    console.info(
      `peer-powertools, same event sent twice: ${await r.effectsOf(e.id)} effect(s), ${duplicates.length} duplicate(s) short-circuited by idempotency`,
    );
    expect(await r.effectsOf(e.id)).toBe(1);
    expect(duplicates).toHaveLength(1);
    expect(await r.effects()).toEqual({ effects: 1, distinct: 1, appliedTwice: 0 });
  });
});
