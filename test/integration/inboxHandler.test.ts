import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { freePort } from '../../devkit/freePort.js';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type {
  InboundMessage,
  Logger,
  Outcome,
  SqlDatabase,
  SqlExecutor,
} from '../../shared/index.js';
import {
  type Envelope,
  encodeEnvelope,
  type InboxHandlerOptions,
  inboxHandler,
  Journal,
  type JournalEntry,
  newEnvelope,
  PermanentMessageError,
  TransientDbError,
} from '../../shared/index.js';
import { memoryBackend } from '../../shared/transport/memory/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

/**
 * The library's own handler (`inboxHandler`) on the real PostgreSQL, with a user effect that
 * inserts into a table of its own: each message's effect is applied once whatever is delivered
 * again, the effect and the inbox claim commit or roll back together, one bad message in a batch
 * does not decide the others, a deferral undoes its claim, and an unreadable message or an
 * unreachable database never reaches the effect.
 */
const CONSUMER = 'shipping';
const PAID = 'order.paid';
const dataSchema = z.object({ orderId: z.uuid(), note: z.string() });

let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase('inbox_handler');
  // The user's own table: no unique key, so that an effect applied twice shows as two rows.
  await t.db.query(
    `CREATE TABLE shipments (
       message_id uuid NOT NULL, order_id uuid NOT NULL, version int NOT NULL, note text NOT NULL)`,
  );
});
afterAll(async () => {
  await t?.drop();
});

/** An `order.paid` event of order `orderId` at `version`. */
function paid(
  options: { orderId?: string; version?: number; note?: string; occurredAt?: Date } = {},
): Envelope {
  const orderId = options.orderId ?? randomUUID();
  return newEnvelope({
    type: PAID,
    aggregate: { type: 'order', id: orderId, version: options.version ?? 1 },
    data: { orderId, note: options.note ?? 'ok' },
    correlationId: `c-${orderId.slice(0, 8)}`,
    producer: 'test',
    ...(options.occurredAt ? { occurredAt: options.occurredAt } : {}),
  });
}

/** The envelope as a transport delivers it. */
function delivery(e: Envelope, attempt = 0): InboundMessage {
  return {
    messageId: e.id,
    body: encodeEnvelope(e),
    attempt,
    redelivered: attempt > 0,
    type: e.type,
    schemaVersion: e.schema_version,
  };
}

/** The default effect: one shipment row per applied message, written in the transaction. */
async function ship(tx: SqlExecutor, e: Envelope): Promise<string> {
  const data = e.data as z.infer<typeof dataSchema>;
  await tx.query(
    'INSERT INTO shipments (message_id, order_id, version, note) VALUES ($1, $2, $3, $4)',
    [e.id, data.orderId, e.aggregate.version, data.note],
  );
  return 'shipped';
}

/** The database, counting the transactions and the statements run in them. */
function counted(db: SqlDatabase) {
  const counts = { transactions: 0, statements: 0 };
  const wrapped: SqlDatabase = {
    query: (sql, params) => db.query(sql, params),
    transaction: (fn, options) => {
      counts.transactions++;
      return db.transaction(
        (tx) =>
          fn({
            query: (sql, params) => {
              counts.statements++;
              return tx.query(sql, params);
            },
          }),
        options,
      );
    },
    close: () => db.close(),
  };
  return { db: wrapped, counts };
}

/** A handler on the test database (counted), its journal lines and the envelopes `apply` saw. */
function setup(
  apply: InboxHandlerOptions['apply'] = ship,
  options: Partial<InboxHandlerOptions> = {},
) {
  const { db, counts } = counted(options.db ?? t.db);
  const journal = new Journal();
  const lines: JournalEntry[] = [];
  journal.addSink((entry) => lines.push(entry));
  const applied: string[] = [];
  const warnings: string[] = [];
  const logger = { warn: (message: string) => warnings.push(message) } as unknown as Logger;
  const handle = inboxHandler({
    consumer: CONSUMER,
    types: [PAID],
    schemaFor: (type, major) => (type === PAID && major === 1 ? dataSchema : undefined),
    budget: TEST_RETRY_BUDGET,
    journal,
    logger,
    ...options,
    db,
    apply: (tx, e, m) => {
      applied.push(e.id);
      return apply(tx, e, m);
    },
  });
  return { handle, counts, lines, applied, warnings };
}

async function shipments(messageId: string): Promise<number> {
  const { rows } = await t.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM shipments WHERE message_id = $1',
    [messageId],
  );
  return rows[0]?.n ?? 0;
}

async function claims(messageId: string): Promise<number> {
  const { rows } = await t.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM processed_messages WHERE consumer_name = $1 AND message_id = $2',
    [CONSUMER, messageId],
  );
  return rows[0]?.n ?? 0;
}

const kinds = (outcomes: Outcome[]) =>
  outcomes.map((o) => (o.kind === 'ack' ? `ack ${o.result}` : `${o.kind} ${o.errorClass}`));

describe('inboxHandler', () => {
  it('applies a message once when it is delivered twice, in one batch or in separate batches', async () => {
    const { handle, counts, lines, applied } = setup();
    const [a, b, c] = [paid(), paid(), paid()];

    const first = await handle([a, b, a, c].map((e) => delivery(e)));
    expect(kinds(first)).toEqual(['ack shipped', 'ack shipped', 'ack duplicate', 'ack shipped']);
    // one transaction for the batch: one claim statement, then one effect per fresh message
    expect(counts).toEqual({ transactions: 1, statements: 4 });

    const again = await handle([delivery(a, 1), delivery(c, 1)]);
    expect(again).toEqual([
      { kind: 'ack', result: 'duplicate' },
      { kind: 'ack', result: 'duplicate' },
    ]);
    expect(applied).toEqual([a.id, b.id, c.id]);
    for (const e of [a, b, c]) {
      expect(await shipments(e.id)).toBe(1);
      expect(await claims(e.id)).toBe(1);
    }
    expect(lines.filter((l) => l.messageId === a.id).map((l) => [l.step, l.outcome])).toEqual([
      ['received', undefined],
      ['received', undefined],
      ['effect-committed', 'shipped'],
      ['duplicate', 'duplicate'],
      ['received', undefined],
      ['duplicate', 'duplicate'],
    ]);
  });

  it('takes an id in upper case for the same message as in lower case', async () => {
    const { handle } = setup();
    const lower = paid();
    const upper = { ...lower, id: lower.id.toUpperCase() };
    expect(kinds(await handle([delivery(upper)]))).toEqual(['ack shipped']);
    expect(kinds(await handle([delivery(upper, 1), delivery(lower)]))).toEqual([
      'ack duplicate',
      'ack duplicate',
    ]);
    expect(await shipments(lower.id)).toBe(1);
  });

  it('commits the effect and the claim together: an effect that fails after writing leaves neither', async () => {
    const e = paid();
    let failures = 1;
    const { handle } = setup(async (tx, envelope) => {
      await ship(tx, envelope);
      if (failures-- > 0)
        throw new TransientDbError('could not serialize access', { code: '40001' });
      return 'shipped';
    });

    const [outcome] = await handle([delivery(e)]);
    expect(outcome).toMatchObject({
      kind: 'retry',
      attempt: 1,
      delayMs: TEST_RETRY_BUDGET.ladderMs[0],
      errorClass: 'transient',
      infrastructure: false,
    });
    expect(await shipments(e.id)).toBe(0);
    expect(await claims(e.id)).toBe(0);

    // redelivered later: applied, once
    expect(kinds(await handle([delivery(e, 1)]))).toEqual(['ack shipped']);
    expect(kinds(await handle([delivery(e, 1)]))).toEqual(['ack duplicate']);
    expect(await shipments(e.id)).toBe(1);
    expect(await claims(e.id)).toBe(1);
  });

  it('parks one poisoned message of a batch and applies the others (each in its own transaction)', async () => {
    const [a, bad, c] = [paid(), paid({ note: 'poison' }), paid()];
    const { handle, counts, warnings } = setup(async (tx, e) => {
      const result = await ship(tx, e);
      if ((e.data as { note: string }).note === 'poison') {
        throw new PermanentMessageError('note: poison is not shippable');
      }
      return result;
    });

    const outcomes = await handle([a, bad, c].map((e) => delivery(e)));
    expect(kinds(outcomes)).toEqual(['ack shipped', 'park permanent', 'ack shipped']);
    expect(outcomes[1]).toEqual({
      kind: 'park',
      reason: 'permanent',
      errorClass: 'permanent',
      error: 'PermanentMessageError: note: poison is not shippable',
    });
    // the shared transaction failed, then one transaction per message
    expect(counts.transactions).toBe(4);
    expect(warnings).toEqual(['batch transaction failed; processing its messages one by one']);
    expect([await shipments(a.id), await shipments(bad.id), await shipments(c.id)]).toEqual([
      1, 0, 1,
    ]);
    expect([await claims(a.id), await claims(bad.id), await claims(c.id)]).toEqual([1, 0, 1]);
  });

  describe('deferred', () => {
    /** Ships version n of an order only once version n - 1 was shipped. */
    const inOrder: InboxHandlerOptions['apply'] = async (tx, e) => {
      if (e.aggregate.version > 1) {
        const { rows } = await tx.query(
          'SELECT 1 FROM shipments WHERE order_id = $1 AND version = $2',
          [e.aggregate.id, e.aggregate.version - 1],
        );
        if (rows.length === 0) return 'deferred';
      }
      return ship(tx, e);
    };

    it('undoes the claim in the same transaction, so that a later delivery applies it', async () => {
      const { handle, counts, lines } = setup(inOrder);
      const orderId = randomUUID();
      const [v1, v2] = [paid({ orderId, version: 1 }), paid({ orderId, version: 2 })];

      const [early] = await handle([delivery(v2)]);
      expect(early).toMatchObject({
        kind: 'retry',
        attempt: 1,
        errorClass: 'deferred',
        infrastructure: false,
      });
      expect(await claims(v2.id)).toBe(0);
      // the claim, the check, the undo
      expect(counts).toEqual({ transactions: 1, statements: 3 });
      expect(lines.at(-1)).toMatchObject({
        step: 'deferred',
        messageId: v2.id,
        outcome: 'retry',
        reason: 'missing predecessor',
      });

      // a batch where the successor comes first: deferred, its predecessor applied, one COMMIT
      const other = randomUUID();
      const [w1, w2] = [paid({ orderId: other, version: 1 }), paid({ orderId: other, version: 2 })];
      expect(kinds(await handle([delivery(w2), delivery(w1)]))).toEqual([
        'retry deferred',
        'ack shipped',
      ]);
      expect([await claims(w2.id), await claims(w1.id)]).toEqual([0, 1]);

      expect(kinds(await handle([delivery(v1), delivery(v2, 1), delivery(w2, 1)]))).toEqual([
        'ack shipped',
        'ack shipped',
        'ack shipped',
      ]);
      for (const e of [v1, v2, w1, w2]) expect(await shipments(e.id)).toBe(1);
    });

    it('parks a deferred message as missing_predecessor once it is too old to wait longer', async () => {
      const occurredAt = new Date(Date.now() - 1_000);
      const v2 = paid({ version: 2, occurredAt });
      const tooLate = occurredAt.getTime() + TEST_RETRY_BUDGET.maxAgeMs - 500;
      const { handle } = setup(inOrder, { now: () => tooLate });

      // attempts do not bound a deferral: only its age does
      const [outcome] = await handle([delivery(v2, TEST_RETRY_BUDGET.maxAttempts + 2)]);
      expect(outcome).toEqual({
        kind: 'park',
        reason: 'missing_predecessor',
        errorClass: 'deferred',
        error: 'predecessor not applied yet',
      });
      expect(await claims(v2.id)).toBe(0);
    });
  });

  it('parks an unknown event type or invalid data as permanent, naming the field, without a transaction', async () => {
    const { handle, counts, applied } = setup();
    const good = paid();
    const shipped = newEnvelope({ ...paidEvent(), type: 'order.shipped' });
    const badData = newEnvelope({ ...paidEvent(), data: { orderId: 'not-a-uuid', note: 'x' } });
    const noNote = newEnvelope({ ...paidEvent(), data: { orderId: randomUUID() } });
    const notJson: InboundMessage = { ...delivery(paid()), body: Buffer.from('{"id": ') };

    const outcomes = await handle([
      delivery(shipped),
      delivery(badData),
      delivery(good),
      delivery(noNote),
      notJson,
    ]);
    expect(kinds(outcomes)).toEqual([
      'park permanent',
      'park permanent',
      'ack shipped',
      'park permanent',
      'park permanent',
    ]);
    const errors = outcomes.map((o) => (o.kind === 'park' ? o.error : undefined));
    expect(errors[0]).toBe(
      `PermanentMessageError: event type order.shipped is not handled by ${CONSUMER}`,
    );
    expect(errors[1]).toMatch(/^PermanentMessageError: data\.orderId: /);
    expect(errors[3]).toMatch(/^PermanentMessageError: data\.note: /);
    expect(errors[4]).toBe('EnvelopeError: body: not valid JSON');
    expect(applied).toEqual([good.id]);
    // the valid message alone in the transaction: its claim and its effect
    expect(counts).toEqual({ transactions: 1, statements: 2 });
    for (const e of [shipped, badData, noNote]) expect(await claims(e.id)).toBe(0);

    // nothing valid: no transaction at all
    await handle([delivery(shipped, 1)]);
    expect(counts.transactions).toBe(1);
  });

  it('retries every message as infrastructure when the database is unreachable, without calling apply', async () => {
    const closed = new PgDatabase({
      connectionString: `postgres://postgres@127.0.0.1:${await freePort()}/none`,
      max: 1,
      connectionTimeoutMillis: 1_000,
    });
    try {
      const { handle, counts, applied } = setup(ship, { db: closed });
      const outcomes = await handle([paid(), paid(), paid()].map((e) => delivery(e)));
      expect(outcomes).toHaveLength(3);
      for (const o of outcomes) {
        expect(o).toMatchObject({
          kind: 'retry',
          attempt: 1,
          errorClass: 'transient',
          infrastructure: true,
        });
      }
      expect(applied).toEqual([]);
      // the batch, then the first one alone: the database is unreachable, the rest are not tried
      expect(counts.transactions).toBe(2);
    } finally {
      await closed.close();
    }
  });

  it("runs behind a backend's consumer: a duplicate, a transient failure and a poisoned message", async () => {
    const backend = memoryBackend({ consumer: CONSUMER, streams: ['orders'] });
    await backend.prepare();
    const [once, flaky, bad] = [paid(), paid(), paid({ note: 'poison' })];
    // fails in the batch's transaction and again in its own: applied on its retry
    let flakes = 2;
    const { handle, applied } = setup(async (tx, e) => {
      const note = (e.data as { note: string }).note;
      if (note === 'poison') throw new PermanentMessageError('note: poison');
      if (e.id === flaky.id && flakes-- > 0) {
        throw new TransientDbError('could not serialize access', { code: '40001' });
      }
      return ship(tx, e);
    });
    const consumer = await backend.consume(handle);
    try {
      await backend.publisher('orders').publish([once, flaky, once, bad]);
      await waitFor(async () => (await shipments(flaky.id)) === 1, {
        message: 'the flaky message applied on its retry',
      });
      expect(await shipments(once.id)).toBe(1);
      expect(applied.filter((id) => id === flaky.id)).toHaveLength(3);
      const parked = await backend.parkingLot().list();
      expect(parked.map((p) => [p.diagnosis.messageId, p.diagnosis.reason])).toEqual([
        [bad.id, 'permanent'],
      ]);
    } finally {
      await consumer.stop();
    }
  });
});

/** The parts of a valid `order.paid` event, to build an invalid one from. */
function paidEvent() {
  const orderId = randomUUID();
  return {
    type: PAID,
    aggregate: { type: 'order', id: orderId, version: 1 },
    data: { orderId, note: 'ok' },
    correlationId: 'c-invalid',
    producer: 'test',
  };
}
