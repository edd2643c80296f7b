import { randomUUID } from 'node:crypto';
import type { ChannelModel } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratch, type ScratchEnvironment } from '../../devkit/scratch.js';
import { waitFor } from '../../devkit/waitFor.js';
import {
  effectCounts,
  ensurePeerSchema,
  parseOrderCreated,
  reserveEffect,
  reserveEffectIn,
} from '../../peers/effect.js';
import {
  pgTransactionalOutboxPeer,
  pgTransactionalOutboxRelay,
  trxSchema,
} from '../../peers/pgTransactionalOutbox.js';
import type { PeerContext, RunningPeer } from '../../peers/types.js';
import { type Envelope, encodeEnvelope, Journal, newEnvelope } from '../../shared/index.js';
import { setStock } from '../../shared/inventory/stock.js';
import { queueDepth, readMessages, testConnection } from '../helpers/amqp.js';
import { SERVICES } from '../helpers/services.js';

const PEER = 'peer-pg-transactional-outbox';
const SKU = 'SKU-PGTO';

function orderCreated(data: Record<string, unknown> = {}): Envelope {
  const orderId = randomUUID();
  return newEnvelope({
    type: 'order.created',
    aggregate: { type: 'order', id: orderId, version: 1 },
    data: { orderId, sku: SKU, quantity: 1, ...data },
    correlationId: orderId,
    producer: 'peers.pgto.test',
  });
}

describe('pg-transactional-outbox peer (polling listener, RabbitMQ)', () => {
  let scratch: ScratchEnvironment;
  let conn: ChannelModel;
  beforeAll(async () => {
    scratch = await createScratch(SERVICES, 'peers_pgto', { transports: ['rabbitmq'] });
    await ensurePeerSchema(scratch.database.db);
    await setStock(scratch.database.db, SKU, 1_000);
    conn = await testConnection(scratch.vhost?.amqpUrl as string);
  });
  afterAll(async () => {
    await conn?.close().catch(() => {});
    await scratch?.close();
  });

  async function publish(queue: string, bodies: (Envelope | string)[]): Promise<void> {
    const ch = await conn.createConfirmChannel();
    for (const b of bodies) {
      const content = typeof b === 'string' ? Buffer.from(b) : encodeEnvelope(b);
      ch.sendToQueue(queue, content, {
        persistent: true,
        ...(typeof b === 'string' ? {} : { messageId: b.id, type: b.type }),
      });
    }
    await ch.waitForConfirms();
    await ch.close();
  }

  /** Starts the consumer peer; `acked` counts the AMQP acks per message id (its journal). */
  async function startPeer(namespace: string, maxDeliveries = 5) {
    const db = scratch.database.db;
    const acked = new Map<string, number>();
    const abandoned: string[] = [];
    const journal = new Journal();
    journal.addSink((e) => {
      if (e.step === 'acked' && e.messageId)
        acked.set(e.messageId, (acked.get(e.messageId) ?? 0) + 1);
      if (e.step === 'abandoned' && e.messageId) abandoned.push(e.messageId);
    });
    const calls = { handle: 0, handleIn: 0 };
    const ctx: PeerContext = {
      namespace,
      db,
      databaseUrl: scratch.database.url,
      amqpUrl: scratch.vhost?.amqpUrl as string,
      redisUrl: 'redis://unused',
      concurrency: 8,
      batchSize: 10,
      maxDeliveries,
      journal,
      handle: async (body) => {
        calls.handle++;
        await reserveEffect(db, PEER, parseOrderCreated(body));
      },
      handleIn: async (client, body) => {
        calls.handleIn++;
        await reserveEffectIn(client, PEER, parseOrderCreated(body));
      },
    };
    const running: RunningPeer = await pgTransactionalOutboxPeer.start(ctx);
    if (running.input.kind !== 'amqp') throw new Error('expected an AMQP input');
    return { running, input: running.input, acked, abandoned, calls };
  }

  it('consumer: 50 events applied once each in the library transaction; a duplicate is dropped by the inbox', async () => {
    const db = scratch.database.db;
    const namespace = 'pgto-c-';
    const { running, input, acked, calls } = await startPeer(namespace);
    try {
      const events = Array.from({ length: 50 }, () => orderCreated());
      await publish(input.queue, events);
      const counts = await waitFor(
        async () => {
          const c = await effectCounts(db);
          return c.distinct >= 50 ? c : undefined;
        },
        // a few take a retry: the poll's row locks make the handler's NOWAIT lock fail (the
        // library counts that as an attempt and retries after the 5 s lock)
        { timeoutMs: 25_000, message: '50 effects' },
      );
      expect(counts).toEqual({ effects: 50, distinct: 50, appliedTwice: 0 });
      expect(calls).toEqual({ handle: 0, handleIn: 50 });

      const twice = orderCreated();
      await publish(input.queue, [twice, twice]);
      await waitFor(
        async () => acked.get(twice.id) === 2 && (await effectCounts(db)).distinct === 51,
        {
          timeoutMs: 15_000,
          message: 'both copies acked, the event applied',
        },
      );
      expect(await effectCounts(db)).toEqual({ effects: 51, distinct: 51, appliedTwice: 0 });
      const { rows } = await db.query<{ n: number; processed: number }>(
        `SELECT count(*)::int AS n, count(processed_at)::int AS processed
           FROM ${trxSchema(namespace)}.inbox WHERE id = $1`,
        [twice.id],
      );
      expect(rows[0]).toEqual({ n: 1, processed: 1 });
      expect(await queueDepth(conn, input.queue)).toBe(0);
    } finally {
      await running.stop();
    }
  });

  it('consumer: a poison event is tried maxDeliveries times (5 s apart), then abandoned in the inbox; a non-envelope is dead-lettered', async () => {
    const db = scratch.database.db;
    const namespace = 'pgto-p-';
    const { running, input, abandoned } = await startPeer(namespace, 3);
    try {
      const poison = orderCreated({ quantity: 'lots' });
      const after = orderCreated();
      await publish(input.queue, [poison, after, '{not-json']);
      await waitFor(() => abandoned.includes(poison.id), {
        timeoutMs: 25_000,
        message: 'poison abandoned',
      });
      const { rows } = await db.query<{
        started_attempts: number;
        finished_attempts: number;
        abandoned: boolean;
        processed: boolean;
      }>(
        `SELECT started_attempts, finished_attempts, abandoned_at IS NOT NULL AS abandoned,
                processed_at IS NOT NULL AS processed
           FROM ${trxSchema(namespace)}.inbox WHERE id = $1`,
        [poison.id],
      );
      expect(rows[0]).toEqual({
        started_attempts: 3,
        finished_attempts: 3,
        abandoned: true,
        processed: false,
      });
      // another order (another segment) was not held up behind it
      await waitFor(
        async () =>
          (await db.query('SELECT 1 FROM peer_effects WHERE event_id = $1', [after.id])).rows
            .length === 1,
        { message: 'the next order applied' },
      );
      await waitFor(async () => (await queueDepth(conn, input.deadLetterQueue as string)) === 1, {
        message: 'the non-envelope dead-lettered',
      });
    } finally {
      await running.stop();
    }
  });

  it('relay: 200 events enqueued, confirmed by the broker, marked processed, all delivered', async () => {
    const namespace = 'pgto-r-';
    const exchange = `${namespace}orders`;
    const queue = `${namespace}relayed`;
    const ch = await conn.createChannel();
    await ch.assertExchange(exchange, 'topic', { durable: true });
    await ch.assertQueue(queue, { durable: true });
    await ch.bindQueue(queue, exchange, 'order.created');
    await ch.close();

    const relay = await pgTransactionalOutboxRelay.start({
      databaseUrl: scratch.database.url,
      amqpUrl: scratch.vhost?.amqpUrl as string,
      exchange,
      routingKey: 'order.created',
      namespace,
    });
    try {
      const events = Array.from({ length: 200 }, () => orderCreated());
      for (let i = 0; i < events.length; i += 20) await relay.enqueue(events.slice(i, i + 20));
      const processed = async () =>
        (
          await scratch.database.db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM ${relay.table} WHERE processed_at IS NOT NULL`,
          )
        ).rows[0]?.n;
      await waitFor(async () => relay.published() >= 200 && (await processed()) === 200, {
        timeoutMs: 25_000,
        message: '200 confirmed and marked processed',
      });
      const ids = new Set(events.map((e) => e.id));
      const received = await readMessages(conn, queue, (m) =>
        [...ids].every((id) => m.some((r) => r.messageId === id)),
      );
      expect(new Set(received.map((r) => r.messageId))).toEqual(ids);
      expect(received[0]?.body).toMatchObject({ type: 'order.created' });
      const lags = relay.lags();
      expect(lags).toHaveLength(200);
      expect(lags.every((l) => l >= 0)).toBe(true);
    } finally {
      await relay.stop();
    }
  });
});
