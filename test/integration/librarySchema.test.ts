import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SqlDatabase, SqlExecutor, SqlParam } from '../../shared/index.js';
import {
  INBOX_TABLE,
  Inbox,
  libraryMigrations,
  type Migration,
  migrate,
  newEnvelope,
  OutboxRelay,
  OutboxStore,
} from '../../shared/index.js';
import { memoryBackend } from '../../shared/transport/memory/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { uniqueName } from '../helpers/services.js';

/**
 * The library's tables (`libraryMigrations`) in a database of their own, as a service adopting
 * the library creates them: the outbox store, the relay and the inbox work on them, the grants
 * docs/outbox-relay.md shows are enough for each side, and their shape is the example's (the
 * `outbox` and `processed_messages` its own migrations create), which keeps the two from drifting.
 */

// OutboxStore's type names the example's two outboxes; the store itself takes any table name
const TABLE = 'shipping_outbox';
const LIBRARY = libraryMigrations({ outboxes: [TABLE] });

/** The doc's least-privilege grants, its role names made unique to this run (roles are the cluster's). */
function docGrants(roles: Record<'shipping_app' | 'relay_app' | 'retention_app', string>): string {
  const doc = readFileSync(
    join(import.meta.dirname, '..', '..', 'docs', 'outbox-relay.md'),
    'utf8',
  );
  const section = doc.slice(doc.indexOf("## The library's tables"));
  const sql = /```sql\n([\s\S]*?)```/.exec(section)?.[1];
  if (!sql) throw new Error('docs/outbox-relay.md, "The library\'s tables": no SQL block');
  return sql.replace(
    /\b(shipping_app|relay_app|retention_app)\b/g,
    (r) => roles[r as keyof typeof roles],
  );
}

const asMigration = (name: string, sql: string): Migration => ({
  name,
  sql,
  checksum: createHash('sha256').update(sql).digest('hex'),
});

/** `db` with every statement run as `role` (SET LOCAL ROLE in a transaction of its own). */
function asRole(db: SqlDatabase, role: string): SqlDatabase {
  const enter = (tx: SqlExecutor) => tx.query(`SET LOCAL ROLE ${role}`);
  return {
    query: (sql, params) =>
      db.transaction(async (tx) => {
        await enter(tx);
        return tx.query(sql, params);
      }),
    transaction: (fn, options) =>
      db.transaction(async (tx) => {
        await enter(tx);
        return fn(tx);
      }, options),
    close: async () => {},
  };
}

/** `db` recording the statements it runs. */
function recording(db: SqlDatabase): {
  db: SqlDatabase;
  seen: { sql: string; params?: readonly SqlParam[] | undefined }[];
} {
  const seen: { sql: string; params?: readonly SqlParam[] | undefined }[] = [];
  const wrap = (ex: SqlExecutor): SqlExecutor => ({
    query: (sql, params) => {
      seen.push({ sql, params });
      return ex.query(sql, params);
    },
  });
  return {
    seen,
    db: {
      ...wrap(db),
      transaction: (fn, o) => db.transaction((tx) => fn(wrap(tx)), o),
      close: () => db.close(),
    },
  };
}

const event = (n: number, id = randomUUID()) =>
  newEnvelope({
    id,
    type: 'shipment.dispatched',
    aggregate: { type: 'shipment', id: `s-${id}`, version: n },
    data: { n },
    correlationId: `c-${n}`,
    producer: 'shipping-service',
  });

/**
 * The shape of `table` with its name written `<t>`: columns, constraints (kind and definition;
 * their names are PostgreSQL's, derived from the table's and cut to 63 bytes), indexes (the
 * definitions, and the names of those no constraint creates).
 */
async function shape(db: SqlExecutor, table: string) {
  const named = (s: string) => s.replace(new RegExp(`\\b${table}(?=_|\\b)`, 'g'), '<t>');
  const columns = await db.query(
    `SELECT ordinal_position, column_name, data_type, is_nullable, column_default
       FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1
      ORDER BY ordinal_position`,
    [table],
  );
  const constraints = await db.query<{ contype: string; def: string; conname: string }>(
    `SELECT contype, pg_get_constraintdef(oid) AS def, conname FROM pg_constraint
      WHERE conrelid = $1::regclass ORDER BY contype, def`,
    [table],
  );
  const indexes = await db.query<{ indexname: string; indexdef: string; owned: boolean }>(
    `SELECT i.indexname, i.indexdef,
            EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = quote_ident(i.indexname)::regclass) AS owned
       FROM pg_indexes i WHERE i.schemaname = 'public' AND i.tablename = $1 ORDER BY i.indexdef`,
    [table],
  );
  for (const c of constraints.rows) expect(c.conname.startsWith(`${table}_`), c.conname).toBe(true);
  return {
    columns: columns.rows,
    constraints: constraints.rows.map((c) => `${c.contype} ${c.def}`),
    indexes: indexes.rows
      .map((i) => ({
        name: i.owned ? '(a constraint’s)' : named(i.indexname),
        def: named(i.indexdef.replace(/ INDEX \S+ ON /, ' INDEX ON ')),
      }))
      .sort((a, b) => (a.def < b.def ? -1 : 1)),
  };
}

describe("the library's tables", () => {
  let t: TestDatabase;
  let example: TestDatabase;
  const base = uniqueName('libroles');
  const roles = {
    shipping_app: `${base}_shipping`,
    relay_app: `${base}_relay`,
    retention_app: `${base}_retention`,
  };
  let grants: Migration;

  beforeAll(async () => {
    t = await createTestDatabase('library_schema', { migrated: false });
    example = await createTestDatabase('library_schema_example');
    grants = asMigration('0001_least_privilege', docGrants(roles));
  });
  afterAll(async () => {
    await t?.drop();
    // the roles' grants were in the database just dropped
    await example?.db.query(`DROP ROLE IF EXISTS ${Object.values(roles).join(', ')}`);
    await example?.drop();
  });

  it('migrate creates them before the service’s own; a second run changes nothing', async () => {
    expect(await migrate(t.db, LIBRARY)).toEqual({
      applied: ['0000_rms_inbox', '0000_rms_outbox_shipping_outbox'],
      skipped: [],
    });
    const before = [await shape(t.db, TABLE), await shape(t.db, INBOX_TABLE)];
    expect(await migrate(t.db, [...LIBRARY, grants])).toEqual({
      applied: ['0001_least_privilege'],
      skipped: ['0000_rms_inbox', '0000_rms_outbox_shipping_outbox'],
    });
    // the same list from a fresh call: the same SQL, the same checksums
    const again = [...libraryMigrations({ outboxes: ['shipping_outbox'] }), grants];
    expect(await migrate(t.db, again)).toEqual({
      applied: [],
      skipped: again.map((m) => m.name),
    });
    expect([await shape(t.db, TABLE), await shape(t.db, INBOX_TABLE)]).toEqual(before);
  });

  it('have the shape of the example’s outbox and inbox (all of its migrations applied)', async () => {
    expect(await shape(t.db, TABLE)).toEqual(await shape(example.db, 'outbox'));
    expect(await shape(t.db, INBOX_TABLE)).toEqual(await shape(example.db, 'processed_messages'));
    // and the index names are the example's, derived from the table's
    const { rows } = await t.db.query<{ indexname: string }>(
      `SELECT indexname FROM pg_indexes WHERE tablename = $1 AND indexname LIKE '%\\_idx' ORDER BY 1`,
      [TABLE],
    );
    expect(rows.map((r) => r.indexname)).toEqual([
      'shipping_outbox_needs_attention_idx',
      'shipping_outbox_published_at_idx',
      'shipping_outbox_unpublished_idx',
    ]);
  });

  it('the store appends in a transaction; the relay publishes and marks, and a failed row waits for an operator', async () => {
    const store = new OutboxStore(TABLE);
    const kept = event(1);
    await t.db.transaction((tx) => store.append(tx, kept));
    await expect(
      t.db.transaction(async (tx) => {
        await store.append(tx, event(2));
        throw new Error('the business change failed');
      }),
    ).rejects.toThrow('the business change failed');
    const many = [event(3), event(4)];
    await t.db.transaction((tx) => store.appendMany(tx, [...many, kept]));

    const backend = memoryBackend({ streams: [TABLE] });
    await backend.prepare();
    const relay = new OutboxRelay(
      { db: t.db, publisher: backend.publisher(TABLE) },
      { table: TABLE, batchSize: 10, maxAttempts: 1, fullClaimEveryMs: 0 },
    );
    expect(await relay.runOnce()).toMatchObject({ claimed: 3, published: 3, failed: 0 });
    expect(backend.take(10).map((m) => m.id)).toEqual([kept.id, ...many.map((e) => e.id)]);
    const { rows } = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${TABLE} WHERE published_at IS NOT NULL`,
    );
    expect(rows[0]?.n).toBe(3);

    // a stream the broker does not have: the row fails, and at the limit needs attention
    const lost = event(5);
    await t.db.transaction((tx) => store.append(tx, lost));
    const nowhere = new OutboxRelay(
      { db: t.db, publisher: backend.publisher('nowhere') },
      { table: TABLE, batchSize: 10, maxAttempts: 1, fullClaimEveryMs: 0 },
    );
    expect(await nowhere.runOnce()).toMatchObject({ failed: 1, needsAttention: 1 });
    expect((await store.needsAttention(t.db)).map((r) => r.id)).toEqual([lost.id]);
    expect(await store.status(t.db)).toMatchObject({ backlog: 0, needsAttention: 1, published: 3 });
    expect(await store.retryNeedsAttention(t.db)).toBe(1);
    expect(await relay.runOnce()).toMatchObject({ published: 1 });
    expect(backend.take(10).map((m) => m.id)).toEqual([lost.id]);
  });

  it('the relay’s and the store’s queries read the outbox’s own indexes', async () => {
    const store = new OutboxStore(TABLE);
    await t.db.transaction((tx) => store.append(tx, event(6)));
    const rec = recording(t.db);
    const backend = memoryBackend({ streams: [TABLE] });
    await backend.prepare();
    const relay = new OutboxRelay(
      { db: rec.db, publisher: backend.publisher(TABLE) },
      { table: TABLE, batchSize: 10, maxAttempts: 3, fullClaimEveryMs: 0 },
    );
    await relay.runOnce();
    const relayStore = relay.store;
    await relayStore.needsAttention(rec.db);
    await relayStore.republish(rec.db, {
      from: new Date(0),
      to: new Date(0),
      eventTypes: () => true,
      reason: 'none',
    });
    const plan = async (match: (sql: string) => boolean) => {
      const s = rec.seen.find((x) => match(x.sql));
      if (!s) throw new Error('statement not run');
      return t.db.transaction(async (tx) => {
        // a table of a few rows: the planner would scan it; the question is which index serves
        await tx.query('SET LOCAL enable_seqscan = off');
        const { rows } = await tx.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${s.sql}`, s.params);
        return rows.map((r) => r['QUERY PLAN']).join('\n');
      });
    };
    expect(await plan((s) => s.includes('SELECT EXISTS'))).toMatch(
      /Index (Only )?Scan using shipping_outbox_unpublished_idx/,
    );
    expect(await plan((s) => s.includes('FOR UPDATE SKIP LOCKED'))).toMatch(
      /Index Scan using shipping_outbox_unpublished_idx/,
    );
    expect(await plan((s) => s.includes('ORDER BY needs_attention_at'))).toMatch(
      /Index Scan using shipping_outbox_needs_attention_idx/,
    );
    expect(await plan((s) => s.includes('SELECT DISTINCT event_type'))).toMatch(
      /Index (Only )?Scan using shipping_outbox_published_at_idx/,
    );
  });

  it('the inbox claims each message once per consumer, and undoes a claim', async () => {
    const inbox = new Inbox('shipping');
    const ids = [randomUUID(), randomUUID()];
    const claim = (i: Inbox, messageIds: string[]) =>
      t.db.transaction(async (tx) => {
        const { rows } = await tx.query<{ message_id: string }>(
          `WITH claimed AS (${i.claimSql(1)}) SELECT message_id FROM claimed ORDER BY 1`,
          i.claimParams(messageIds),
        );
        return rows.map((r) => r.message_id);
      });
    expect(await claim(inbox, ids)).toEqual([...ids].sort());
    expect(await claim(inbox, ids)).toEqual([]);
    expect(await claim(new Inbox('audit'), ids)).toEqual([...ids].sort());
    await t.db.transaction((tx) =>
      tx.query(inbox.undoSql(1), inbox.undoParams([ids[0] as string])),
    );
    expect(await claim(inbox, ids)).toEqual([ids[0]]);
  });

  it('the grants docs/outbox-relay.md shows are enough for each side, and no more', async () => {
    const shipping = asRole(t.db, roles.shipping_app);
    const relayDb = asRole(t.db, roles.relay_app);
    const retention = asRole(t.db, roles.retention_app);
    const store = new OutboxStore(TABLE);
    const denied = /permission denied/;

    // the service: writes events, claims and undoes inbox rows
    const e = event(7);
    await shipping.transaction((tx) => store.append(tx, e));
    await shipping.transaction((tx) => store.appendMany(tx, [e, event(8)]));
    const inbox = new Inbox('shipping');
    const id = randomUUID();
    await shipping.transaction(async (tx) => {
      await tx.query(`WITH c AS (${inbox.claimSql(1)}) SELECT 1 FROM c`, inbox.claimParams([id]));
      await tx.query(inbox.undoSql(1), inbox.undoParams([id]));
    });
    await expect(shipping.transaction((tx) => store.markPublished(tx, [e.id]))).rejects.toThrow(
      denied,
    );
    await expect(shipping.query(`SELECT payload FROM ${TABLE}`)).rejects.toThrow(denied);

    // the relay: claims, publishes, marks, reads the figures; writes no event
    const backend = memoryBackend({ streams: [TABLE] });
    await backend.prepare();
    const relay = new OutboxRelay(
      { db: relayDb, publisher: backend.publisher(TABLE) },
      { table: TABLE, batchSize: 10, maxAttempts: 3, fullClaimEveryMs: 0 },
    );
    expect(await relay.runOnce()).toMatchObject({ published: 2, failed: 0 });
    expect(await store.status(relayDb)).toMatchObject({ backlog: 0 });
    await expect(relayDb.transaction((tx) => store.append(tx, event(9)))).rejects.toThrow(denied);
    await expect(relayDb.query(`SELECT 1 FROM ${INBOX_TABLE}`)).rejects.toThrow(denied);

    // retention: deletes published outbox rows and old inbox rows, writes nothing
    const cutoff = new Date(Date.now() + 60_000);
    const outboxRows = await retention.query(
      `DELETE FROM ${TABLE} WHERE published_at IS NOT NULL AND published_at < $1`,
      [cutoff],
    );
    expect(outboxRows.rowCount).toBeGreaterThan(0);
    const inboxRows = await retention.query(`DELETE FROM ${INBOX_TABLE} WHERE processed_at < $1`, [
      cutoff,
    ]);
    expect(inboxRows.rowCount).toBeGreaterThan(0);
    await expect(retention.transaction((tx) => store.append(tx, event(10)))).rejects.toThrow(
      denied,
    );
    await expect(retention.query(`UPDATE ${TABLE} SET last_error = 'x'`)).rejects.toThrow(denied);
  });
});
