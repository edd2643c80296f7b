import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConstraintViolationError, migrate, UniqueViolationError } from '../../shared/index.js';
import { bothServicesMigrations, migrateService } from '../../shared/pipeline/schema.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

describe('migrations', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase('migrations', { migrated: false });
  });
  afterAll(() => t.drop());

  it('apply to an empty database and a second run changes nothing', async () => {
    const all = await bothServicesMigrations();
    const first = await migrate(t.db, all);
    expect(first.applied).toEqual(all.map((m) => m.name));

    const schemaBefore = await t.db.query(
      `SELECT table_name, column_name, data_type FROM information_schema.columns
        WHERE table_schema = 'public' ORDER BY 1, 2`,
    );
    const second = await migrate(t.db, all);
    expect(second.applied).toEqual([]);
    expect(second.skipped).toEqual(all.map((m) => m.name));
    const schemaAfter = await t.db.query(
      `SELECT table_name, column_name, data_type FROM information_schema.columns
        WHERE table_schema = 'public' ORDER BY 1, 2`,
    );
    expect(schemaAfter.rows).toEqual(schemaBefore.rows);
    const { rows } = await t.db.query<{ n: string }>('SELECT count(*) AS n FROM schema_migrations');
    expect(Number(rows[0]?.n)).toBe(all.length);

    const tables = new Set(schemaAfter.rows.map((r) => r.table_name));
    for (const pinned of [
      'schema_migrations',
      'orders',
      'outbox',
      'stock',
      'reservations',
      'processed_messages',
      'inventory_outbox',
    ]) {
      expect(tables).toContain(pinned);
    }
  });

  it('refuses a migration whose file changed after it was applied', async () => {
    const all = await bothServicesMigrations();
    const tampered = all.map((m, i) => (i === 0 ? { ...m, checksum: 'different' } : m));
    await expect(migrate(t.db, tampered)).rejects.toThrow(/was changed after it was applied/);
  });

  it('a failing migration leaves nothing behind (each runs in a transaction)', async () => {
    const bad = {
      name: '9999_broken',
      sql: 'CREATE TABLE half_done (id int); SELECT 1/0;',
      checksum: 'x',
    };
    await expect(migrate(t.db, [...(await bothServicesMigrations()), bad])).rejects.toThrow(
      /division by zero/,
    );
    const { rows } = await t.db.query(
      `SELECT 1 FROM information_schema.tables WHERE table_name = 'half_done'
       UNION ALL SELECT 1 FROM schema_migrations WHERE name = '9999_broken'`,
    );
    expect(rows).toHaveLength(0);
  });

  it('constraints make bad states impossible', async () => {
    await t.db.query(`INSERT INTO stock (sku, available, reserved) VALUES ('sku-1', 5, 0)`);
    await expect(
      t.db.query(`UPDATE stock SET available = -1 WHERE sku = 'sku-1'`),
    ).rejects.toBeInstanceOf(ConstraintViolationError);
    await expect(
      t.db.query(`UPDATE stock SET reserved = 6 WHERE sku = 'sku-1'`),
    ).rejects.toBeInstanceOf(ConstraintViolationError);
    await t.db.query(
      `INSERT INTO processed_messages (consumer_name, message_id) VALUES ('inventory', gen_random_uuid())`,
    );
    const { rows } = await t.db.query<{ message_id: string }>(
      'SELECT message_id FROM processed_messages',
    );
    await expect(
      t.db.query(
        `INSERT INTO processed_messages (consumer_name, message_id) VALUES ('inventory', $1)`,
        [rows[0]?.message_id as string],
      ),
    ).rejects.toBeInstanceOf(UniqueViolationError);
    // the same message for another consumer is a different inbox row
    await t.db.query(
      `INSERT INTO processed_messages (consumer_name, message_id) VALUES ('audit', $1)`,
      [rows[0]?.message_id as string],
    );
    await expect(
      t.db.query(`INSERT INTO orders (id, sku, quantity, created_event_id, correlation_id)
                  VALUES (gen_random_uuid(), 'sku-1', 0, gen_random_uuid(), 'c')`),
    ).rejects.toBeInstanceOf(ConstraintViolationError);
  });
});

describe("each service's own database", () => {
  const dbs: TestDatabase[] = [];
  afterAll(async () => {
    for (const d of dbs) await d.drop();
  });

  const tablesOf = async (d: TestDatabase) =>
    (
      await d.db.query<{ t: string }>(
        "SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public' ORDER BY 1",
      )
    ).rows.map((r) => r.t);

  it('holds that service’s tables and the library’s, nothing of the other service', async () => {
    const orders = await createTestDatabase('migrations_orders', { migrated: false });
    const inventory = await createTestDatabase('migrations_inventory', { migrated: false });
    dbs.push(orders, inventory);
    await migrateService(orders.db, 'orders');
    await migrateService(inventory.db, 'inventory');
    expect(await tablesOf(orders)).toEqual([
      'order_results_set_aside',
      'orders',
      'outbox',
      'processed_messages',
      'schema_migrations',
    ]);
    expect(await tablesOf(inventory)).toEqual([
      'inventory_outbox',
      'processed_messages',
      'reservations',
      'schema_migrations',
      'stock',
    ]);
    // a second run changes nothing
    expect((await migrateService(orders.db, 'orders')).applied).toEqual([]);
  });

  it('refuses a database of the single-database layout, before changing anything', async () => {
    const old = await createTestDatabase('migrations_single', { migrated: false });
    dbs.push(old);
    await migrate(old.db, [
      { name: '0001_orders_and_outbox', sql: 'CREATE TABLE orders (id uuid)', checksum: 'x' },
    ]);
    await expect(migrateService(old.db, 'inventory')).rejects.toThrow(/single-database layout/);
    expect(await tablesOf(old)).toEqual(['orders', 'schema_migrations']);
  });
});
