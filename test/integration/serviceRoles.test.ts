import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withDatabase } from '../../devkit/scratch.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import { scramSha256Verifier } from '../../shared/db/scram.js';
import type { InboundMessage, SqlDatabase, SqlExecutor, SqlParam } from '../../shared/index.js';
import {
  type Envelope,
  encodeEnvelope,
  Inbox,
  newEnvelope,
  OutboxRelay,
  retireLogin,
} from '../../shared/index.js';
import { INVENTORY_CONSUMER, ReserveInventory } from '../../shared/inventory/ReserveInventory.js';
import { setStock } from '../../shared/inventory/stock.js';
import { runMaintenance } from '../../shared/maintenance/retention.js';
import { ORDER_RESULTS_CONSUMER, OrderResults } from '../../shared/orders/OrderResults.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import {
  DB_ROLES,
  DB_SIDES,
  type DbSide,
  ensureServiceLogins,
} from '../../shared/pipeline/appRole.js';
import { memoryBackend } from '../../shared/transport/memory/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { DATABASE_URL, uniqueName } from '../helpers/services.js';

/**
 * One database login per side (the services' `_roles` migrations, `ensureServiceLogins`: what the
 * migrate function does on deploy), each running its side's real code paths and refused
 * everything else: the grants per table, and the row policies of the inbox (each consumer its own
 * rows) and of the outboxes (maintenance deletes published rows only). Both services' schemas
 * share one scratch database here, so that one login is seen refused the other service's tables
 * too (deployed, they are not even in its database). The local server trusts every connection,
 * so the password is checked in scramLogin.test.ts, on a server of the test's own.
 */

/** A database whose every statement (text and parameters) is recorded. */
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
      transaction: (fn, options) => db.transaction((tx) => fn(wrap(tx)), options),
      close: () => db.close(),
    },
  };
}

const asMessage = (e: Envelope): InboundMessage => ({
  messageId: e.id,
  body: encodeEnvelope(e),
  attempt: 0,
  redelivered: false,
  type: e.type,
});

const PERMISSION = /permission denied for table/;

describe('one database login per side', () => {
  let t: TestDatabase;
  const base = uniqueName('svc');
  const users = Object.fromEntries(DB_SIDES.map((s) => [s, `${base}_${s}`])) as Record<
    DbSide,
    string
  >;
  const passwords = Object.fromEntries(
    DB_SIDES.map((s) => [s, `pw-${s}-${randomUUID()}`]),
  ) as Record<DbSide, string>;
  const as = {} as Record<DbSide, PgDatabase>;
  let sent: { sql: string; params?: readonly SqlParam[] | undefined }[];

  beforeAll(async () => {
    t = await createTestDatabase('service_roles');
    const rec = recording(t.db);
    const ready = await ensureServiceLogins(
      rec.db,
      Object.fromEntries(
        DB_SIDES.map((s) => [s, { username: users[s], password: passwords[s] }]),
      ) as Record<DbSide, { username: string; password: string }>,
    );
    sent = rec.seen;
    for (const side of DB_SIDES) {
      expect(ready[side], side).toEqual({ username: users[side], created: true });
      const url = new URL(withDatabase(DATABASE_URL, t.name));
      url.username = users[side];
      url.password = '';
      as[side] = new PgDatabase({ connectionString: url.toString(), max: 2 });
    }
  });

  afterAll(async () => {
    for (const db of Object.values(as)) await db.close();
    await t?.drop();
    const admin = new PgDatabase({ connectionString: DATABASE_URL, max: 1 });
    for (const user of Object.values(users)) await admin.query(`DROP ROLE IF EXISTS ${user}`);
    await admin.close();
  });

  it("each login is a member of its side's group role only, with its password stored as a SCRAM-SHA-256 verifier never sent in clear", async () => {
    for (const side of DB_SIDES) {
      const { rows } = await t.db.query<{ groups: string[]; rolpassword: string; login: boolean }>(
        `SELECT r.rolcanlogin AS login, a.rolpassword,
                ARRAY(SELECT g.rolname::text FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                       WHERE m.member = r.oid ORDER BY 1) AS groups
           FROM pg_roles r JOIN pg_authid a ON a.oid = r.oid WHERE r.rolname = $1`,
        [users[side]],
      );
      const row = rows[0];
      expect(row?.groups, side).toEqual([DB_ROLES[side].group]);
      expect(row?.login, side).toBe(true);
      // the stored verifier is exactly the one of this password with the salt it carries
      const m = /^SCRAM-SHA-256\$(\d+):([^$]+)\$/.exec(row?.rolpassword ?? '');
      expect(m, side).not.toBeNull();
      const salt = Buffer.from(m?.[2] ?? '', 'base64');
      expect(salt.length, side).toBe(16);
      expect(row?.rolpassword, side).toBe(
        scramSha256Verifier(passwords[side], { salt, iterations: Number(m?.[1]) }),
      );
      // no statement or parameter sent to the server held the password
      for (const s of sent) {
        expect(`${s.sql} ${JSON.stringify(s.params ?? [])}`, side).not.toContain(passwords[side]);
      }
    }
  });

  it("orders: places, cancels and shows orders, applies results; cannot touch stock, reservations or the inventory side's tables", async () => {
    await setStock(t.db, 'SKU-SVC', 5);
    const orders = new OrderService({ db: as.orders });
    const placed = await orders.place({ sku: 'SKU-SVC', quantity: 2, correlationId: 'svc' });
    expect((await orders.get(placed.orderId)).reservation.status).toBe('pending');
    await expect(
      as.orders.query("UPDATE stock SET reserved = 0 WHERE sku = 'SKU-SVC'"),
    ).rejects.toThrow(/permission denied for table stock/);
    for (const sql of [
      'SELECT * FROM stock',
      'SELECT * FROM reservations',
      'SELECT payload FROM inventory_outbox',
      'SELECT payload FROM outbox',
      'DELETE FROM outbox',
      'DELETE FROM orders',
      'UPDATE outbox SET published_at = now()',
    ]) {
      await expect(as.orders.query(sql), sql).rejects.toThrow(PERMISSION);
    }
    // a result for the order, applied as the order side (inbox claim + status + set-aside)
    const result = newEnvelope({
      type: 'inventory.reserved',
      aggregate: { type: 'order', id: placed.orderId, version: 1 },
      data: { orderId: placed.orderId, sku: 'SKU-SVC', quantity: 2 },
      correlationId: 'svc',
      producer: 'inventory-service',
    });
    const results = new OrderResults({ db: as.orders });
    const poison: InboundMessage = {
      ...asMessage(result),
      messageId: randomUUID(),
      body: Buffer.from('{'),
    };
    expect(await results.process([asMessage(result), poison])).toEqual([
      { kind: 'ack', result: 'applied' },
      { kind: 'ack', result: 'set-aside' },
    ]);
    // again: the inbox (under its row policy) makes it a duplicate, the set-aside row stays one
    expect(await results.process([asMessage(result), poison])).toEqual([
      { kind: 'ack', result: 'duplicate' },
      { kind: 'ack', result: 'set-aside' },
    ]);
    expect((await orders.get(placed.orderId)).reservation.status).toBe('reserved');
    const cancelled = await orders.cancel(placed.orderId, 'svc');
    expect(cancelled.cancelled).toBe(true);
    const { rows } = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM order_results_set_aside',
    );
    expect(rows[0]?.n).toBe(1);
  });

  it("inventory: reserves, writes its results and undoes deferred claims; cannot touch orders or the order side's outbox", async () => {
    await setStock(t.db, 'SKU-INV', 3);
    const orderId = randomUUID();
    const created = newEnvelope({
      type: 'order.created',
      aggregate: { type: 'order', id: orderId, version: 1 },
      data: { orderId, sku: 'SKU-INV', quantity: 2 },
      correlationId: 'svc',
      producer: 'order-service',
    });
    const cancelled = newEnvelope({
      type: 'order.cancelled',
      aggregate: { type: 'order', id: orderId, version: 2 },
      data: { orderId, sku: 'SKU-INV', quantity: 2 },
      correlationId: 'svc',
      producer: 'order-service',
    });
    const reserve = new ReserveInventory({ db: as.inventory }, { budget: TEST_RETRY_BUDGET });
    // the cancellation first: deferred (its claim undone, DELETE under the row policy)
    const [deferred] = await reserve.process([asMessage(cancelled)]);
    expect(deferred?.kind).toBe('retry');
    expect(await reserve.process([asMessage(created)])).toMatchObject([{ kind: 'ack' }]);
    expect(await reserve.process([asMessage(created)])).toMatchObject([{ kind: 'ack' }]);
    expect(await reserve.process([asMessage(cancelled)])).toMatchObject([{ kind: 'ack' }]);
    const { rows } = await t.db.query<{ status: string; reserved: number; events: string[] }>(
      `SELECT r.status, s.reserved,
              ARRAY(SELECT event_type FROM inventory_outbox WHERE aggregate_id = $1 ORDER BY aggregate_version) AS events
         FROM reservations r JOIN stock s USING (sku) WHERE r.order_id = $1::uuid`,
      [orderId],
    );
    expect(rows).toEqual([
      { status: 'released', reserved: 0, events: ['inventory.reserved', 'inventory.released'] },
    ]);
    for (const sql of [
      'SELECT * FROM orders',
      "UPDATE orders SET status = 'cancelled'",
      'SELECT payload FROM outbox',
      'SELECT payload FROM inventory_outbox',
      'UPDATE inventory_outbox SET published_at = now()',
      'DELETE FROM stock',
      'SELECT * FROM order_results_set_aside',
    ]) {
      await expect(as.inventory.query(sql), sql).rejects.toThrow(PERMISSION);
    }
    // the operator's `stock set --stack` runs as this side's login
    await expect(setStock(as.inventory, 'SKU-NEW', 3)).resolves.toMatchObject({ available: 3 });
  });

  it("each side sees and claims only its own consumer's inbox rows; maintenance sees them all", async () => {
    const mine = randomUUID();
    const theirs = randomUUID();
    await t.db.query(
      `INSERT INTO processed_messages (consumer_name, message_id) VALUES ($1, $2::uuid), ($3, $4::uuid)`,
      [INVENTORY_CONSUMER, mine, ORDER_RESULTS_CONSUMER, theirs],
    );
    const seen = async (db: SqlExecutor) =>
      (
        await db.query<{ consumer_name: string }>(
          'SELECT DISTINCT consumer_name FROM processed_messages ORDER BY 1',
        )
      ).rows.map((r) => r.consumer_name);
    expect(await seen(as.inventory)).toEqual([INVENTORY_CONSUMER]);
    expect(await seen(as.orders)).toEqual([ORDER_RESULTS_CONSUMER]);
    expect(await seen(as.maintenance)).toEqual([INVENTORY_CONSUMER, ORDER_RESULTS_CONSUMER]);
    await expect(as.relay.query('SELECT * FROM processed_messages')).rejects.toThrow(PERMISSION);

    // the claim (INSERT … ON CONFLICT DO NOTHING RETURNING) under the policies
    const claim = async (db: SqlExecutor, consumer: string, ids: string[]) => {
      const inbox = new Inbox(consumer);
      const { rows } = await db.query<{ message_id: string }>(
        `WITH c AS (${inbox.claimSql(1)}) SELECT message_id FROM c`,
        inbox.claimParams(ids),
      );
      return rows.map((r) => r.message_id);
    };
    const fresh = randomUUID();
    expect(await claim(as.inventory, INVENTORY_CONSUMER, [mine, fresh])).toEqual([fresh]);
    expect(await claim(as.inventory, INVENTORY_CONSUMER, [fresh])).toEqual([]);
    // a claim in the other consumer's name is refused, new or already there
    await expect(claim(as.inventory, ORDER_RESULTS_CONSUMER, [randomUUID()])).rejects.toThrow(
      /row-level security/,
    );
    await expect(claim(as.inventory, ORDER_RESULTS_CONSUMER, [theirs])).rejects.toThrow(
      /row-level security/,
    );
    await expect(claim(as.orders, INVENTORY_CONSUMER, [randomUUID()])).rejects.toThrow(
      /row-level security/,
    );
    // undoing the other side's claims deletes nothing
    const undo = new Inbox(ORDER_RESULTS_CONSUMER);
    expect((await as.inventory.query(undo.undoSql(1), undo.undoParams([theirs]))).rowCount).toBe(0);
    const { rows } = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM processed_messages WHERE message_id = $1::uuid',
      [theirs],
    );
    expect(rows[0]?.n).toBe(1);
  });

  it('relay: claims, publishes and marks both outboxes; no business table, no insert or delete in the outboxes', async () => {
    const orders = new OrderService({ db: t.db });
    const placed = await orders.place({ sku: 'SKU-REL', quantity: 1, correlationId: 'svc' });
    const backend = memoryBackend({ streams: ['outbox', 'inventory_outbox'] });
    await backend.prepare();
    for (const table of ['outbox', 'inventory_outbox'] as const) {
      const relay = new OutboxRelay(
        { db: as.relay, publisher: backend.publisher(table) },
        { table, batchSize: 100, maxAttempts: 5 },
      );
      const round = await relay.runOnce();
      expect(round.claimed, table).toBeGreaterThan(0);
      expect(round.published, table).toBe(round.claimed);
    }
    const { rows } = await t.db.query<{ published: boolean }>(
      'SELECT published_at IS NOT NULL AS published FROM outbox WHERE id = $1::uuid',
      [placed.eventId],
    );
    expect(rows[0]?.published).toBe(true);
    for (const sql of [
      'SELECT * FROM orders',
      'SELECT * FROM stock',
      'UPDATE stock SET reserved = 0',
      "UPDATE orders SET status = 'cancelled'",
      'SELECT * FROM reservations',
      'DELETE FROM outbox',
      'DELETE FROM inventory_outbox',
      `INSERT INTO outbox (id, event_type, schema_version, aggregate_type, aggregate_id, aggregate_version, payload, producer, correlation_id)
       VALUES (gen_random_uuid(), 'x', '1.0', 'order', 'o', 1, '{}', 'p', 'c')`,
    ]) {
      await expect(as.relay.query(sql), sql).rejects.toThrow(PERMISSION);
    }
  });

  it('maintenance: deletes old inbox rows and old published outbox rows, never an unpublished one; updates nothing', async () => {
    const orders = new OrderService({ db: t.db });
    const unpublished = await orders.place({ sku: 'SKU-MNT', quantity: 1, correlationId: 'svc' });
    await t.db.query(
      `UPDATE outbox SET occurred_at = now() - interval '400 days' WHERE id = $1::uuid`,
      [unpublished.eventId],
    );
    const far = new Date(Date.now() + 400 * 24 * 3600 * 1000);
    const { rows: before } = await t.db.query<{ inbox: number; published: number }>(
      `SELECT (SELECT count(*)::int FROM processed_messages) AS inbox,
              (SELECT count(*)::int FROM outbox WHERE published_at IS NOT NULL)
            + (SELECT count(*)::int FROM inventory_outbox WHERE published_at IS NOT NULL) AS published`,
    );
    expect(before[0]?.inbox).toBeGreaterThan(0);
    expect(before[0]?.published).toBeGreaterThan(0);
    const done = await runMaintenance(as.maintenance, {
      retention: { parkingMs: 86_400_000, inboxMs: 3 * 86_400_000, publishedOutboxMs: 86_400_000 },
      budget: TEST_RETRY_BUDGET,
      now: far,
    });
    expect(done.tables.processed_messages?.deleted).toBe(before[0]?.inbox);
    expect((done.tables.outbox?.deleted ?? 0) + (done.tables.inventory_outbox?.deleted ?? 0)).toBe(
      before[0]?.published,
    );
    // an unpublished row, however old, is out of its reach even by a plain DELETE
    expect((await as.maintenance.query('DELETE FROM outbox')).rowCount).toBe(0);
    const { rows } = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM outbox WHERE id = $1::uuid',
      [unpublished.eventId],
    );
    expect(rows[0]?.n).toBe(1);
    for (const sql of [
      "UPDATE orders SET status = 'cancelled'",
      'UPDATE stock SET reserved = 0',
      'UPDATE outbox SET attempts = 0',
      'UPDATE processed_messages SET processed_at = now()',
      'SELECT * FROM orders',
      'SELECT * FROM stock',
      'DELETE FROM orders',
      'DELETE FROM reservations',
    ]) {
      await expect(as.maintenance.query(sql), sql).rejects.toThrow(PERMISSION);
    }
  });

  it('no side may change the schema or reach schema_migrations', async () => {
    for (const side of DB_SIDES) {
      await expect(as[side].query('DROP TABLE orders'), side).rejects.toThrow(/must be owner/);
      await expect(as[side].query('CREATE TABLE intruder (id int)'), side).rejects.toThrow(
        /permission denied for schema public/,
      );
      await expect(as[side].query('SELECT * FROM schema_migrations'), side).rejects.toThrow(
        PERMISSION,
      );
    }
  });

  it('a second deploy updates the passwords, refuses two sides sharing a user; a retired login can no longer log in', async () => {
    const again = await ensureServiceLogins(t.db, {
      orders: { username: users.orders, password: 'second-Pa55word' },
    });
    expect(again.orders).toEqual({ username: users.orders, created: false });
    await expect(
      ensureServiceLogins(t.db, {
        orders: { username: users.orders, password: 'x-Pa55word' },
        relay: { username: users.orders, password: 'x-Pa55word' },
      }),
    ).rejects.toThrow(/orders and relay both name/);
    await expect(
      ensureServiceLogins(t.db, { relay: { username: 'orders_app', password: 'x-Pa55word' } }),
    ).rejects.toThrow(/is a group role/);
    await expect(
      ensureServiceLogins(t.db, { relay: { username: 'postgres', password: 'x-Pa55word' } }),
    ).rejects.toThrow(/the migrating role/);
    await expect(
      ensureServiceLogins(t.db, { relay: { username: users.relay, password: 'pässword' } }),
    ).rejects.toThrow(/ASCII/);

    // retiring (the library's `retireLogin`): no login, no password, no group
    const retiree = `${base}_retiree`;
    await ensureServiceLogins(t.db, { maintenance: { username: retiree, password: 'r-Pa55word' } });
    try {
      expect(await retireLogin(t.db, retiree)).toBe(true);
      const { rows } = await t.db.query<{
        login: boolean;
        password: string | null;
        groups: number;
      }>(
        `SELECT r.rolcanlogin AS login, a.rolpassword AS password,
                (SELECT count(*)::int FROM pg_auth_members m WHERE m.member = r.oid) AS groups
           FROM pg_roles r JOIN pg_authid a ON a.oid = r.oid WHERE r.rolname = $1`,
        [retiree],
      );
      expect(rows[0]).toEqual({ login: false, password: null, groups: 0 });
      const url = new URL(withDatabase(DATABASE_URL, t.name));
      url.username = retiree;
      const db = new PgDatabase({ connectionString: url.toString(), max: 1 });
      await expect(db.query('SELECT 1')).rejects.toThrow(/not permitted to log in/);
      await db.close();
      expect(await retireLogin(t.db, `${base}_nobody`)).toBe(false);
    } finally {
      await t.db.query(`DROP ROLE IF EXISTS ${retiree}`);
    }
  });
});
