import { randomUUID } from 'node:crypto';
import {
  DeleteTopicCommand,
  ListSubscriptionsByTopicCommand,
  UnsubscribeCommand,
} from '@aws-sdk/client-sns';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import type { Topology } from '../../shared/index.js';
import {
  DEFAULT_RETENTION,
  type Envelope,
  newEnvelope,
  OutboxRelay,
  OutboxStore,
} from '../../shared/index.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { createSnsClient, type SqsBackend, sqsModule } from '../../shared/transport/sqs/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { uniqueName } from '../helpers/services.js';
import { receiveAll, SQS_SERVERS } from '../helpers/sqs.js';

/** Another team's service on the example's inventory stream: its own queue, one event type. */
const SHIPPING: Topology = {
  streams: { shipping_outbox: 'shipping', inventory_outbox: 'inventory' },
  subscriptions: {
    shipping: {
      queue: 'shipping.reservations',
      stream: 'inventory_outbox',
      types: ['inventory.reserved'],
      failures: 'retries',
    },
  },
};

const event = (type: string, note = 'fine'): Envelope =>
  newEnvelope({
    type,
    aggregate: { type: 'order', id: randomUUID(), version: 1 },
    data: { note },
    correlationId: 'fan-out',
    producer: 'test',
  });

/**
 * Fan-out on SQS: a stream published through an SNS topic, each subscriber's queue subscribed to
 * it with raw message delivery. fauxqs serves SNS beside SQS (moto's SNS is not used here).
 */
describe.each(SQS_SERVERS.filter((s) => s.name === 'fauxqs'))(
  'SQS fan-out through SNS ($name)',
  (server) => {
    const prefix = `${uniqueName('fanout').replace(/_/g, '-')}-`;
    let t: TestDatabase;
    let inventory: SqsBackend;
    let shipping: SqsBackend;
    const backend = (topology: Topology, fanOut: string[]) =>
      sqsModule.create({
        endpoint: server.endpoint,
        region: 'us-east-1',
        prefix,
        mode: 'visibility',
        budget: TEST_RETRY_BUDGET,
        retention: DEFAULT_RETENTION,
        consumer: 'fan-out@test',
        topology,
        fanOut,
        requestTimeoutMs: 2_000,
        maxAttempts: 1,
      });

    beforeAll(async () => {
      t = await createTestDatabase('sqs_fan_out');
      inventory = backend(PIPELINE_TOPOLOGY, ['inventory_outbox']);
      shipping = backend(SHIPPING, ['inventory_outbox', 'shipping_outbox']);
      await inventory.prepare();
      await shipping.prepare();
    });
    afterAll(async () => {
      await inventory?.close();
      await shipping?.close();
      await t?.drop();
    });

    const queueUrl = async (b: SqsBackend, which: 'sourceUrl' | 'resultsUrl') =>
      (await b.queues())[which];

    it('every subscriber gets every event it takes, once, as it was published (body and attributes)', async () => {
      const reserved = [event('inventory.reserved'), event('inventory.reserved')];
      const released = event('inventory.released');
      const outcomes = await inventory
        .publisher('inventory_outbox')
        .publish([...reserved, released]);
      expect(outcomes.map((o) => o.ok)).toEqual([true, true, true]);

      const results = await receiveAll(
        inventory.client,
        await queueUrl(inventory, 'resultsUrl'),
        (m) => m.length >= 3,
      );
      const theirs = await receiveAll(
        shipping.client,
        await queueUrl(shipping, 'sourceUrl'),
        (m) => m.length >= 2,
      );
      // the order side takes inventory.#; shipping's filter policy takes inventory.reserved only
      expect(results.map((m) => JSON.parse(m.Body ?? '{}').id).sort()).toEqual(
        [...reserved, released].map((e) => e.id).sort(),
      );
      expect(theirs.map((m) => JSON.parse(m.Body ?? '{}').id).sort()).toEqual(
        reserved.map((e) => e.id).sort(),
      );
      // raw delivery: the envelope itself, with the identity attributes the consumers read
      const first = theirs[0];
      expect(JSON.parse(first?.Body ?? '{}')).toMatchObject({ type: 'inventory.reserved' });
      expect(first?.MessageAttributes?.event_type?.StringValue).toBe('inventory.reserved');
      expect(first?.MessageAttributes?.event_id?.StringValue).toMatch(/^[0-9a-f-]{36}$/);
      // nothing else arrives
      const more = await receiveAll(
        shipping.client,
        await queueUrl(shipping, 'sourceUrl'),
        () => true,
      );
      expect(more).toEqual([]);
    });

    it('the relay marks a row only when the topic accepted it: a refused entry stays, the rest are published', async () => {
      const store = new OutboxStore('inventory_outbox');
      const envelopes = [
        event('inventory.reserved'),
        // SNS (like SQS) refuses a message over 256 KiB: its entry fails, alone
        event('inventory.reserved', 'x'.repeat(300 * 1024)),
        event('inventory.released'),
      ];
      await t.db.transaction(async (tx) => {
        for (const e of envelopes) await store.append(tx, e);
      });
      const relay = new OutboxRelay(
        { db: t.db, publisher: inventory.publisher('inventory_outbox') },
        {
          table: 'inventory_outbox',
          batchSize: 10,
          maxAttempts: 5,
          retryBaseMs: 50,
          retryMaxMs: 200,
        },
      );
      expect(await relay.runOnce()).toMatchObject({ claimed: 3, published: 2, failed: 1 });
      const { rows } = await t.db.query<{ id: string; last_error: string }>(
        'SELECT id, last_error FROM inventory_outbox WHERE published_at IS NULL',
      );
      expect(rows.map((r) => r.id)).toEqual([envelopes[1]?.id]);
      expect(rows[0]?.last_error).toMatch(/^nacked: InvalidParameter/);
      await receiveAll(
        inventory.client,
        await queueUrl(inventory, 'resultsUrl'),
        (m) => m.length >= 2,
      );
      await receiveAll(
        shipping.client,
        await queueUrl(shipping, 'sourceUrl'),
        (m) => m.length >= 1,
      );
    });

    it('a publish nobody would receive is unroutable: a topic with no subscription, a topic that is gone', async () => {
      // shipping's own stream: nobody subscribed to its topic yet
      const lonely = await shipping
        .publisher('shipping_outbox')
        .publish([event('shipping.scheduled')]);
      expect(lonely[0]).toMatchObject({ ok: false, reason: 'unroutable' });
      expect(lonely[0]?.ok === false && lonely[0].error).toMatch(/no confirmed subscription/);

      // a topic deleted under a publisher that has not looked it up yet
      const sns = createSnsClient({ endpoint: server.endpoint, region: 'us-east-1' });
      try {
        const topicArn = await shipping.topicArn('shipping_outbox');
        const subs = await sns.send(new ListSubscriptionsByTopicCommand({ TopicArn: topicArn }));
        for (const s of subs.Subscriptions ?? []) {
          await sns.send(new UnsubscribeCommand({ SubscriptionArn: s.SubscriptionArn }));
        }
        await sns.send(new DeleteTopicCommand({ TopicArn: topicArn }));
        const fresh = backend(SHIPPING, ['shipping_outbox']);
        try {
          const gone = await fresh
            .publisher('shipping_outbox')
            .publish([event('shipping.scheduled')]);
          expect(gone[0]).toMatchObject({ ok: false, reason: 'unroutable' });
          expect(gone[0]?.ok === false && gone[0].error).toMatch(/no SNS topic/);
        } finally {
          await fresh.close();
        }
      } finally {
        sns.destroy();
      }
    });
  },
);
