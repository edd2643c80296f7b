import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import type { ChannelModel } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratch, type ScratchEnvironment } from '../../devkit/scratch.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import type { Publisher, SqlDatabase } from '../../shared/index.js';
import { DEFAULT_RETENTION, newEnvelope, OutboxRelay, OutboxStore } from '../../shared/index.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { SET_ASIDE_PREFIX } from '../../shared/outbox/OutboxStore.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import type { RabbitMqBackend } from '../../shared/transport/rabbitmq/index.js';
import { SQS_ATTRIBUTES } from '../../shared/transport/sqs/constants.js';
import { readMessages, testConnection } from '../helpers/amqp.js';
import { localDataApi } from '../helpers/dataApi.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { SERVICES } from '../helpers/services.js';
import { createSqsRig, receiveAll, SQS_SERVERS, type SqsRig } from '../helpers/sqs.js';

/** The message limit of these relays: small, so that a "too large" row is cheap to write. */
const MAX_MESSAGE_BYTES = 4_096;
const options = {
  table: 'outbox' as const,
  batchSize: 100,
  maxAttempts: 5,
  retryBaseMs: 50,
  retryMaxMs: 200,
  maxMessageBytes: MAX_MESSAGE_BYTES,
};

/**
 * Rows that can never be published, each written valid (an hour older than everything else, so
 * they are at the head of the claim) and then broken the way a mixed deploy or a hand edit breaks
 * one. `reason` is what the relay must record.
 */
const BAD_ROWS = [
  {
    label: 'newer schema major',
    edit: `schema_version = '2.0'`,
    reason: /schema_version: major 2/,
  },
  { label: 'payload not an object', edit: `payload = '[1, 2]'::jsonb`, reason: /^invalid .*data/ },
  { label: 'not an event type', edit: `event_type = 'Order Created!'`, reason: /type: must look/ },
  {
    label: 'too large',
    edit: `payload = jsonb_build_object('blob', repeat('x', ${MAX_MESSAGE_BYTES}))`,
    reason: /too large: the message is \d+ bytes, the limit is 4096/,
  },
] as const;

async function writeBadRows(db: SqlDatabase): Promise<Map<string, (typeof BAD_ROWS)[number]>> {
  const store = new OutboxStore('outbox');
  const byId = new Map<string, (typeof BAD_ROWS)[number]>();
  for (const bad of BAD_ROWS) {
    const orderId = randomUUID();
    const envelope = newEnvelope({
      type: 'order.created',
      aggregate: { type: 'order', id: orderId, version: 1 },
      data: { orderId, sku: 'sku-bad', quantity: 1 },
      correlationId: `bad-${bad.label}`,
      producer: 'order-service',
      occurredAt: new Date(Date.now() - 3_600_000),
    });
    await store.append(db, envelope);
    await db.query(`UPDATE outbox SET ${bad.edit} WHERE id = $1::uuid`, [envelope.id]);
    byId.set(envelope.id, bad);
  }
  return byId;
}

async function placeGood(db: SqlDatabase, n: number): Promise<string[]> {
  const orders = new OrderService({ db });
  const ids: string[] = [];
  for (let i = 0; i < n; i++)
    ids.push(
      (await orders.place({ sku: 'sku-1', quantity: 1, correlationId: `good-${i}` })).eventId,
    );
  return ids;
}

async function rowsOf(db: SqlDatabase) {
  const { rows } = await db.query<{
    id: string;
    published: boolean;
    needs_attention: boolean;
    attempts: number;
    last_error: string | null;
  }>(
    `SELECT id, published_at IS NOT NULL AS published, needs_attention_at IS NOT NULL AS needs_attention,
            attempts, last_error FROM outbox`,
  );
  return new Map(rows.map((r) => [r.id, r]));
}

/** One round with bad rows at the head: the good ones go out, the bad ones are set aside. */
async function expectOneRoundSetsAsideAndPublishes(
  db: SqlDatabase,
  relay: OutboxRelay,
  delivered: (n: number) => Promise<string[]>,
) {
  const bad = await writeBadRows(db);
  const good = await placeGood(db, 5);

  const round = await relay.runOnce();

  expect(round).toMatchObject({ claimed: 9, published: 5, failed: 0, setAside: 4 });
  const rows = await rowsOf(db);
  for (const id of good) expect(rows.get(id)).toMatchObject({ published: true });
  for (const [id, { label, reason }] of bad) {
    const row = rows.get(id);
    expect(row, label).toMatchObject({ published: false, needs_attention: true, attempts: 0 });
    expect(row?.last_error?.startsWith(SET_ASIDE_PREFIX), label).toBe(true);
    expect(row?.last_error?.slice(SET_ASIDE_PREFIX.length), label).toMatch(reason);
  }
  expect((await delivered(5)).sort()).toEqual([...good].sort());
  // the next round no longer sees them
  expect(await relay.runOnce()).toMatchObject({ claimed: 0, setAside: 0 });
  const status = await relay.store.status(db);
  expect(status).toMatchObject({ backlog: 0, needsAttention: 4, setAside: 4, published: 5 });
  // an hour old, but needing attention: not the age of the backlog the relay works on
  expect(status.oldestUnpublishedAgeSeconds).toBeNull();
  return bad;
}

const cli = (args: string[], databaseUrl: string) =>
  promisify(execFile)(process.execPath, ['--import', 'tsx', 'bin/cli.ts', ...args], {
    env: { ...process.env, DATABASE_URL: databaseUrl, INVENTORY_DATABASE_URL: databaseUrl },
  });

describe('outbox relay: a row that cannot be published is set aside (RabbitMQ)', () => {
  let scratch: ScratchEnvironment;
  let t: TestDatabase;
  let backend: RabbitMqBackend;
  let conn: ChannelModel;

  beforeAll(async () => {
    scratch = await createScratch(SERVICES, 'relay_setaside');
    t = scratch.database;
    backend = scratch.backend('rabbitmq', {
      budget: TEST_RETRY_BUDGET,
      retention: DEFAULT_RETENTION,
      topology: PIPELINE_TOPOLOGY,
      consumer: 'relay-setaside-test',
    });
    await backend.prepare('publish');
    conn = await testConnection(scratch.vhost?.amqpUrl as string);
  });
  afterAll(async () => {
    await conn?.close().catch(() => {});
    await scratch?.close();
  });

  it('one round publishes the good rows behind bad ones; cli status shows why; a fixed row goes back with `outbox retry`', async () => {
    const relay = new OutboxRelay({ db: t.db, publisher: backend.publisher('outbox') }, options);
    const read = async (n: number) =>
      (await readMessages(conn, RABBITMQ_NAMES.inventoryQueue, (m) => m.length >= n)).map(
        (m) => m.messageId as string,
      );
    const bad = await expectOneRoundSetsAsideAndPublishes(t.db, relay, read);

    // the operator's view: counted, listed with the reason, exit code 1
    const status = await cli(['outbox', 'status', '--json'], t.url).then(
      () => expect.fail('outbox status must exit 1 while rows need attention'),
      (err: { code: number; stdout: string }) => err,
    );
    expect(status.code).toBe(1);
    const [outbox] = JSON.parse(status.stdout) as {
      table: string;
      needsAttention: number;
      setAside: number;
      rows: { id: string; setAside: boolean; reason: string }[];
    }[];
    expect(outbox).toMatchObject({ table: 'outbox', needsAttention: 4, setAside: 4 });
    for (const [id, { reason }] of bad) {
      const row = outbox?.rows.find((r) => r.id === id);
      expect(row?.setAside).toBe(true);
      expect(row?.reason).toMatch(reason);
    }

    // fix one (the newer-major row, as after the deploy that reads it), put all back: the fixed
    // one is published, the others are set aside again
    const fixed = [...bad].find(([, b]) => b.label === 'newer schema major')?.[0] as string;
    await t.db.query(`UPDATE outbox SET schema_version = '1.0' WHERE id = $1::uuid`, [fixed]);
    const retry = await cli(['outbox', 'retry', '--table', 'outbox'], t.url);
    expect(retry.stdout).toContain('outbox: 4 row(s) back in the batches');
    expect(await relay.runOnce()).toMatchObject({ claimed: 4, published: 1, setAside: 3 });
    expect(await read(1)).toEqual([fixed]);
    expect(await relay.store.status(t.db)).toMatchObject({ needsAttention: 3, setAside: 3 });
  }, 120_000); // two CLI processes (tsx start-up) on a busy machine

  it('drain counts the set-aside rows and keeps publishing', async () => {
    await t.db.query('TRUNCATE outbox');
    await backend.withChannel((ch) => ch.purgeQueue(RABBITMQ_NAMES.inventoryQueue));
    const relay = new OutboxRelay(
      { db: t.db, publisher: backend.publisher('outbox') },
      { ...options, batchSize: 2 },
    );
    await writeBadRows(t.db);
    await placeGood(t.db, 3);
    const result = await relay.drain({ budgetMs: 10_000, idleWaitMs: 10, stopWhenIdle: true });
    expect(result).toMatchObject({ published: 3, setAside: 4, failed: 0, roundErrors: 0 });
  });
});

describe.each(SQS_SERVERS.slice(0, 1))('outbox relay: set aside on SQS ($name)', (server) => {
  let t: TestDatabase;
  let f: SqsRig;
  beforeAll(async () => {
    t = await createTestDatabase(`relay_setaside_${server.name}`);
    f = await createSqsRig(server, 'relay_setaside');
  });
  afterAll(async () => {
    await f?.close();
    await t?.drop();
  });

  it('one round publishes the good rows behind bad ones and sets the bad ones aside', async () => {
    const relay = new OutboxRelay({ db: t.db, publisher: f.backend.publisher('outbox') }, options);
    await expectOneRoundSetsAsideAndPublishes(t.db, relay, async (n) =>
      (await receiveAll(f.client, f.queues.sourceUrl, (m) => m.length >= n)).map(
        (m) => m.MessageAttributes?.[SQS_ATTRIBUTES.eventId]?.StringValue as string,
      ),
    );
  });
});

describe('outbox relay: set aside through the RDS Data API adapter (local endpoint)', () => {
  let t: TestDatabase;
  let api: Awaited<ReturnType<typeof localDataApi>>;
  beforeAll(async () => {
    t = await createTestDatabase('relay_setaside_data_api');
    api = await localDataApi(t.url, t.name);
  });
  afterAll(async () => {
    await api?.close();
    await t?.drop();
  });

  it('the claim, the set-aside update and the status query work on the Data API too', async () => {
    // a broker that confirms everything: the SQL is under test here
    const sent: string[] = [];
    const publisher: Publisher = {
      ready: async () => {},
      close: async () => {},
      publish: async (envelopes) =>
        envelopes.map((e) => {
          sent.push(e.id);
          return { id: e.id, ok: true as const };
        }),
    };
    const relay = new OutboxRelay({ db: api.db, publisher }, options);
    await expectOneRoundSetsAsideAndPublishes(api.db, relay, async (n) => {
      expect(sent).toHaveLength(n);
      return sent;
    });
  });
});
