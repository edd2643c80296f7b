import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withDatabase } from '../../devkit/scratch.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { APP_GROUP_ROLE, ensureAppLogin } from '../../shared/db/appRole.js';
import { loadMigrations, migrate } from '../../shared/db/migrate.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import { runMaintenance } from '../../shared/maintenance/retention.js';
import { OrderResults } from '../../shared/orders/OrderResults.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { OutboxRelay } from '../../shared/outbox/OutboxRelay.js';
import { OutboxStore } from '../../shared/outbox/OutboxStore.js';
import { InventoryRig } from '../helpers/inventory.js';
import { DATABASE_URL, uniqueName } from '../helpers/services.js';

/**
 * Least privilege on the database: after the migrations, a login user made a member of the
 * app role by `ensureAppLogin` (what the migrate function does on deploy) runs the pipeline's
 * real code paths, and cannot change the schema or read what is not the pipeline's.
 * (The local server trusts every connection, so the password is not checked here.)
 */
describe('the application database role', () => {
  let b: InventoryRig;
  let app: PgDatabase;
  const user = uniqueName('app_user');

  beforeAll(async () => {
    b = await InventoryRig.create('app_role');
    expect(await ensureAppLogin(b.t.db, { username: user, password: 'first-Pa55word' })).toEqual({
      username: user,
      created: true,
    });
    const url = new URL(withDatabase(DATABASE_URL, b.t.name));
    url.username = user;
    url.password = '';
    app = new PgDatabase({ connectionString: url.toString(), max: 4, applicationName: user });
  });
  afterAll(async () => {
    await app?.close();
    await b?.close();
    await new PgDatabase({ connectionString: DATABASE_URL, max: 1 }).query(
      `DROP ROLE IF EXISTS ${user}`,
    );
  });

  it('places an order, relays it, reserves it and runs maintenance as the app user', async () => {
    await b.stock('SKU-APP', 3);
    const orders = new OrderService({ db: app });
    const placed = await orders.place({ sku: 'SKU-APP', quantity: 2, correlationId: 'app-role' });
    const tooMany = await orders.place({ sku: 'SKU-APP', quantity: 5, correlationId: 'app-role' });
    const relay = new OutboxRelay(
      { db: app, publisher: b.backend.publisher('outbox') },
      { table: 'outbox', batchSize: 10, maxAttempts: 5 },
    );
    expect(await relay.runOnce()).toMatchObject({ claimed: 2, published: 2 });
    await b.worker({ db: app });
    await b.waitForLine(placed.eventId, 'acked');
    await b.waitForLine(tooMany.eventId, 'acked');
    expect(await b.stockOf('SKU-APP')).toEqual({ available: 3, reserved: 2 });
    // inventory's results (reserved, rejected) are in its outbox; the order side applies them
    // (OrderResults, as the app user), then the relay publishes them
    const rows = await app.transaction((tx) => new OutboxStore('inventory_outbox').claim(tx, 10));
    expect(rows.map((r) => r.envelope.type).sort()).toEqual([
      'inventory.reservation_rejected',
      'inventory.reserved',
    ]);
    const applied = await new OrderResults({ db: app }).process(
      rows.map((r) => ({
        messageId: r.envelope.id,
        body: Buffer.from(JSON.stringify(r.envelope)),
        attempt: 0,
        redelivered: false,
        type: r.envelope.type,
      })),
    );
    expect(applied.map((o) => (o.kind === 'ack' ? o.result : o.kind))).toEqual([
      'applied',
      'applied',
    ]);
    expect((await orders.get(placed.orderId)).reservation.status).toBe('reserved');
    expect((await orders.get(tooMany.orderId)).reservation.status).toBe('rejected');
    const results = new OutboxRelay(
      { db: app, publisher: b.backend.publisher('inventory_outbox') },
      { table: 'inventory_outbox', batchSize: 10, maxAttempts: 5 },
    );
    expect(await results.runOnce()).toMatchObject({ claimed: 2, published: 2 });
    await orders.cancel(placed.orderId, 'app-role');
    // maintenance deletes by age (a reference time far ahead makes every published row old)
    const far = new Date(Date.now() + 400 * 24 * 3600 * 1000);
    const done = await runMaintenance(app, {
      retention: { parkingMs: 86_400_000, inboxMs: 3 * 86_400_000, publishedOutboxMs: 86_400_000 },
      budget: TEST_RETRY_BUDGET,
      now: far,
    });
    expect(done.tables.outbox.deleted).toBe(2);
    // the two results; inbox rows: two order events (inventory) and two results (order side)
    expect(done.tables.inventory_outbox.deleted).toBe(2);
    expect(done.tables.processed_messages.deleted).toBe(4);
  });

  it.each([
    ['DROP TABLE orders', /must be owner/],
    ['ALTER TABLE outbox ADD COLUMN x int', /must be owner/],
    ['CREATE TABLE intruder (id int)', /permission denied for schema public/],
    ['TRUNCATE outbox', /permission denied for table outbox/],
    ['SELECT rolpassword FROM pg_authid', /permission denied for table pg_authid/],
    ['SELECT * FROM schema_migrations', /permission denied for table schema_migrations/],
    [`CREATE ROLE intruder_${process.pid} LOGIN`, /permission denied to create role/],
  ])('cannot run %s', async (sql, error) => {
    await expect(app.query(sql)).rejects.toThrow(error);
  });

  it('the app role may use every table of the schema but schema_migrations, also one a later migration adds', async () => {
    // a later migration, run by the migrating role like the others
    const later = {
      name: '9999_later_table',
      sql: 'CREATE TABLE later_table (id bigserial PRIMARY KEY, note text)',
      checksum: 'later',
    };
    await migrate(b.t.db, [...(await loadMigrations()), later]);
    const { rows } = await b.t.db.query<{ table_name: string; rows: boolean; truncate: boolean }>(
      `SELECT table_name::text,
              has_table_privilege($1::text, format('public.%I', table_name), 'SELECT,INSERT,UPDATE,DELETE') AS rows,
              has_table_privilege($1::text, format('public.%I', table_name), 'TRUNCATE') AS truncate
         FROM information_schema.tables
        WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1`,
      [APP_GROUP_ROLE],
    );
    const pipelineTables = rows.filter((r) => r.table_name !== 'schema_migrations');
    expect(pipelineTables.map((r) => r.table_name)).toEqual(
      expect.arrayContaining(['orders', 'outbox', 'inventory_outbox', 'stock', 'later_table']),
    );
    for (const r of pipelineTables) expect(r, r.table_name).toMatchObject({ rows: true });
    for (const r of rows) expect(r, r.table_name).toMatchObject({ truncate: false });
    expect(rows.find((r) => r.table_name === 'schema_migrations')).toMatchObject({ rows: false });
    // the sequence behind the later table's bigserial too
    await app.query(`INSERT INTO later_table (note) VALUES ('as the app user')`);
  });

  it('a second deploy updates the password and keeps the membership; refuses the migrating role', async () => {
    expect(await ensureAppLogin(b.t.db, { username: user, password: 'second-Pa55word' })).toEqual({
      username: user,
      created: false,
    });
    const { rows } = await b.t.db.query<{ member: boolean; login: boolean }>(
      `SELECT pg_has_role($1::text, $2::text, 'MEMBER') AS member,
              (SELECT rolcanlogin FROM pg_roles WHERE rolname = $1::text) AS login`,
      [user, APP_GROUP_ROLE],
    );
    expect(rows[0]).toEqual({ member: true, login: true });
    await expect(
      ensureAppLogin(b.t.db, { username: 'postgres', password: 'whatever-123' }),
    ).rejects.toThrow(/the migrating role/);
    await expect(
      ensureAppLogin(b.t.db, { username: 'Robert"); --', password: 'x' }),
    ).rejects.toThrow(/lower-case identifier/);
  });
});
