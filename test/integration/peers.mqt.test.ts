import { randomUUID } from 'node:crypto';
import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { ChannelModel } from 'amqplib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createScratch, type ScratchEnvironment } from '../../devkit/scratch.js';
import { waitFor } from '../../devkit/waitFor.js';
import {
  effectCounts,
  ensurePeerSchema,
  parseOrderCreated,
  reserveEffect,
} from '../../peers/effect.js';
import { mqtAmqpPeer } from '../../peers/mqtAmqp.js';
import { mqtSqsPeer } from '../../peers/mqtSqs.js';
import type {
  PeerConsumer,
  PeerContext,
  PeerDelivery,
  PeerInput,
  RunningPeer,
} from '../../peers/types.js';
import {
  type Envelope,
  encodeEnvelope,
  Journal,
  type JournalEntry,
  newEnvelope,
} from '../../shared/index.js';
import { setStock } from '../../shared/inventory/stock.js';
import { createSqsClient } from '../../shared/transport/sqs/index.js';
import { testConnection } from '../helpers/amqp.js';
import { SERVICES } from '../helpers/services.js';
import { receiveAll, SQS_SERVERS } from '../helpers/sqs.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const SKU = 'SKU-MQT';

function orderCreated(): Envelope {
  const orderId = randomUUID();
  return newEnvelope({
    type: 'order.created',
    aggregate: { type: 'order', id: orderId, version: 1 },
    data: { orderId, sku: SKU, quantity: 1 },
    correlationId: orderId,
    producer: 'peers.mqt.test',
  });
}

const body = (b: Envelope | string) => (typeof b === 'string' ? b : encodeEnvelope(b).toString());

/** A peer under test on one transport: its scratch database and a way to publish to it. */
interface Rig {
  scratch: ScratchEnvironment;
  context: Omit<PeerContext, 'namespace' | 'handle' | 'journal'>;
  publish(input: PeerInput, bodies: (Envelope | string)[]): Promise<void>;
  /** The bodies in the peer's dead-letter queue (read and removed) once `count` are there. */
  deadLetters(input: PeerInput, count: number): Promise<string[]>;
  close(): Promise<void>;
}

async function sqsRig(): Promise<Rig> {
  const server = SQS_SERVERS.find((s) => s.name === 'fauxqs') ?? SQS_SERVERS[0];
  if (!server) throw new Error('no SQS server');
  const scratch = await createScratch(SERVICES, 'peers_mqt_sqs', { transports: ['sqs'] });
  // longer than sqs-consumer's 20-s long poll
  const client: SQSClient = createSqsClient({
    endpoint: server.endpoint,
    requestTimeoutMs: 25_000,
  });
  return {
    scratch,
    context: contextOf(scratch, {
      sqs: { client, endpoint: server.endpoint, region: 'us-east-1' },
    }),
    async publish(input, bodies) {
      if (input.kind !== 'sqs') throw new Error('not an SQS input');
      for (let i = 0; i < bodies.length; i += 10) {
        const out = await client.send(
          new SendMessageBatchCommand({
            QueueUrl: input.queueUrl,
            Entries: bodies
              .slice(i, i + 10)
              .map((b, k) => ({ Id: String(k), MessageBody: body(b) })),
          }),
        );
        expect(out.Failed ?? []).toEqual([]);
      }
    },
    async deadLetters(input, count) {
      if (input.kind !== 'sqs' || !input.deadLetterQueueUrl) throw new Error('no DLQ');
      const got = await receiveAll(client, input.deadLetterQueueUrl, (m) => m.length >= count);
      return got.map((m) => m.Body ?? '');
    },
    async close() {
      client.destroy();
      await scratch.close();
    },
  };
}

async function amqpRig(): Promise<Rig> {
  const scratch = await createScratch(SERVICES, 'peers_mqt_amqp', { transports: ['rabbitmq'] });
  const amqpUrl = scratch.vhost?.amqpUrl as string;
  const conn: ChannelModel = await testConnection(amqpUrl);
  return {
    scratch,
    context: contextOf(scratch, { amqpUrl }),
    async publish(input, bodies) {
      if (input.kind !== 'amqp') throw new Error('not an AMQP input');
      const ch = await conn.createConfirmChannel();
      for (const b of bodies) {
        ch.publish(input.exchange, input.routingKey, Buffer.from(body(b)), {
          persistent: true,
          contentType: 'application/json',
          ...(typeof b === 'string' ? {} : { messageId: b.id, type: b.type }),
        });
      }
      await ch.waitForConfirms();
      await ch.close();
    },
    async deadLetters(input, count) {
      if (input.kind !== 'amqp' || !input.deadLetterQueue) throw new Error('no DLQ');
      const queue = input.deadLetterQueue;
      const ch = await conn.createChannel();
      const got: string[] = [];
      try {
        await waitFor(
          async () => {
            const m = await ch.get(queue, { noAck: true });
            if (m) got.push(m.content.toString('utf8'));
            return got.length >= count;
          },
          { intervalMs: 20, message: `${count} messages in ${queue} (got ${got.length})` },
        );
      } finally {
        await ch.close();
      }
      return got;
    },
    async close() {
      await conn.close().catch(() => {});
      await scratch.close();
    },
  };
}

function contextOf(
  scratch: ScratchEnvironment,
  transport: Pick<PeerContext, 'sqs' | 'amqpUrl'>,
): Rig['context'] {
  return {
    db: scratch.database.db,
    databaseUrl: scratch.database.url,
    redisUrl: REDIS_URL,
    concurrency: 4,
    batchSize: 10,
    maxDeliveries: 3,
    ...transport,
  };
}

describe.each([
  { peer: mqtSqsPeer, rig: sqsRig },
  { peer: mqtAmqpPeer, rig: amqpRig },
])('$peer.id (message-queue-toolkit)', ({ peer, rig: createRig }) => {
  let rig: Rig;
  let running: RunningPeer | undefined;
  let lines: JournalEntry[];
  let test = 0;

  beforeAll(async () => {
    rig = await createRig();
    await ensurePeerSchema(rig.scratch.database.db);
  });
  afterEach(async () => {
    await running?.stop();
    running = undefined;
  });
  afterAll(async () => {
    await rig?.close();
  });

  /** Fresh effects and stock, then the peer on a namespace of its own; `fail` may throw first. */
  async function start(
    fail: (id: string, delivery: PeerDelivery) => boolean = () => false,
  ): Promise<RunningPeer> {
    const db = rig.scratch.database.db;
    await db.query('TRUNCATE peer_effects');
    await setStock(db, SKU, 1_000);
    lines = [];
    const journal = new Journal();
    journal.addSink((e) => lines.push(e));
    running = await (peer as PeerConsumer).start({
      ...rig.context,
      namespace: `${rig.scratch.sqsPrefix}t${++test}-`,
      journal,
      handle: async (b, delivery) => {
        const event = parseOrderCreated(b);
        if (fail(event.id, delivery)) throw new Error('transient failure');
        await reserveEffect(db, peer.id, event);
      },
    });
    return running;
  }

  const stepsOf = (id: string) => lines.filter((l) => l.messageId === id).map((l) => l.step);

  it('applies 50 events once each', async () => {
    const { input } = await start();
    const events = Array.from({ length: 50 }, orderCreated);
    await rig.publish(input, events);
    await waitFor(async () => (await effectCounts(rig.scratch.database.db)).distinct === 50, {
      timeoutMs: 20_000,
      message: '50 effects',
    });
    expect(await effectCounts(rig.scratch.database.db)).toEqual({
      effects: 50,
      distinct: 50,
      appliedTwice: 0,
    });
    await waitFor(() => lines.filter((l) => l.step === 'acked').length === 50);
    expect(lines.filter((l) => l.step === 'received')).toHaveLength(50);
  });

  it('sends invalid bodies to the dead-letter queue without handling them', async () => {
    const { input } = await start();
    const wrongType = { ...orderCreated(), type: 'order.cancelled' };
    const poison = ['{not-json', JSON.stringify(wrongType)];
    await rig.publish(input, poison);
    expect((await rig.deadLetters(input, 2)).sort()).toEqual(poison.sort());
    expect(lines.filter((l) => l.step === 'parked')).toHaveLength(2);
    expect(lines.some((l) => l.step === 'received')).toBe(false);
  });

  if (peer.id === 'peer-mqt-sqs') {
    it('deduplicates the same event sent twice (Redis store): applied once', async () => {
      const { input } = await start();
      const e = orderCreated();
      await rig.publish(input, [e, e]); // one batch: both may be in flight at once (the lock)
      await waitFor(() => stepsOf(e.id).includes('duplicate'), { message: 'the duplicate' });
      expect(stepsOf(e.id).sort()).toEqual(['acked', 'duplicate', 'received']);
      expect(await effectCounts(rig.scratch.database.db)).toEqual({
        effects: 1,
        distinct: 1,
        appliedTwice: 0,
      });
    });

    // ~31 s: a thrown error is not retried by the toolkit, the message reappears after the
    // queue's visibility timeout (30 s, the SQS default)
    it('a handler failing once: the message comes back after the visibility timeout, applied once', async () => {
      const e = orderCreated();
      const { input } = await start((id, d) => id === e.id && d.attempt === 1);
      const sent = Date.now();
      await rig.publish(input, [e]);
      await waitFor(() => stepsOf(e.id).includes('acked'), { timeoutMs: 45_000 });
      expect(Date.now() - sent).toBeGreaterThanOrEqual(29_000);
      expect(stepsOf(e.id)).toEqual(['received', 'retry-scheduled', 'received', 'acked']);
      expect((await effectCounts(rig.scratch.database.db)).effects).toBe(1);
    }, 60_000);
  } else {
    it('does not deduplicate: the same event sent twice is applied twice (the store is never consulted)', async () => {
      const { input } = await start();
      const e = orderCreated();
      await rig.publish(input, [e, e]);
      await waitFor(() => stepsOf(e.id).filter((s) => s === 'acked').length === 2);
      expect(stepsOf(e.id)).not.toContain('duplicate');
      expect(await effectCounts(rig.scratch.database.db)).toEqual({
        effects: 2,
        distinct: 1,
        appliedTwice: 1,
      });
    });

    it('a handler failing once: requeued at once, applied once', async () => {
      const e = orderCreated();
      const { input } = await start((id, d) => id === e.id && d.attempt === 1);
      await rig.publish(input, [e]);
      await waitFor(() => stepsOf(e.id).includes('acked'));
      expect(stepsOf(e.id)).toEqual(['received', 'retry-scheduled', 'received', 'acked']);
      expect((await effectCounts(rig.scratch.database.db)).effects).toBe(1);
    });
  }
});
