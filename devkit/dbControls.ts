import type { SqlDatabase } from '../shared/db/types.js';

/**
 * Database controls for the lab and the tests. This one: a switch in the run's own database that
 * makes writing a reservation fail with a transient error (SQLSTATE 40001, serialization failure)
 * for chosen orders, all of them, or the next n writes, until it is cleared: a database problem
 * that affects some messages and not others, without cutting the connection (so a trigger handler
 * does not treat it as "database unreachable").
 */
export class ReservationFailures {
  private installed = false;

  constructor(private readonly db: SqlDatabase) {}

  private async install(): Promise<void> {
    if (this.installed) return;
    await this.db.query(`CREATE TABLE IF NOT EXISTS lab_failing_orders (order_id uuid)`);
    // Sequences are not transactional: the count of writes survives the rollbacks it causes.
    await this.db.query(`CREATE SEQUENCE IF NOT EXISTS lab_reservation_writes`);
    await this.db.query(`CREATE TABLE IF NOT EXISTS lab_fail_writes_upto (upto bigint)`);
    await this.db.query(`
      CREATE OR REPLACE FUNCTION lab_fail_reservation() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE n bigint := nextval('lab_reservation_writes');
      BEGIN
        IF EXISTS (SELECT 1 FROM lab_failing_orders
                    WHERE order_id IS NULL OR order_id = NEW.order_id)
           OR n <= (SELECT coalesce(max(upto), 0) FROM lab_fail_writes_upto) THEN
          RAISE EXCEPTION 'lab: injected serialization failure' USING ERRCODE = '40001';
        END IF;
        RETURN NEW;
      END $$`);
    await this.db.query(`
      CREATE OR REPLACE TRIGGER lab_fail_reservation BEFORE INSERT ON reservations
        FOR EACH ROW EXECUTE FUNCTION lab_fail_reservation()`);
    this.installed = true;
  }

  /** Writing a reservation for `orderId` (every order when omitted) fails until `clear()`. */
  async fail(orderId?: string): Promise<void> {
    await this.install();
    await this.db.query('INSERT INTO lab_failing_orders (order_id) VALUES ($1)', [orderId ?? null]);
  }

  /** The next `n` reservation writes fail (whichever messages they belong to), later ones pass. */
  async failNext(n: number): Promise<void> {
    await this.install();
    await this.db.query(
      `INSERT INTO lab_fail_writes_upto (upto)
       SELECT (CASE WHEN is_called THEN last_value ELSE last_value - 1 END) + $1
         FROM lab_reservation_writes`,
      [n],
    );
  }

  async clear(): Promise<void> {
    await this.install();
    await this.db.query('DELETE FROM lab_failing_orders');
    await this.db.query('DELETE FROM lab_fail_writes_upto');
  }
}

/** Holds a row lock on a stock row until released: statements that need it wait. */
export async function holdStockLock(db: SqlDatabase, sku: string): Promise<() => Promise<void>> {
  const held = Promise.withResolvers<void>();
  const locked = Promise.withResolvers<void>();
  const done = db.transaction(async (tx) => {
    await tx.query('SELECT 1 FROM stock WHERE sku = $1 FOR UPDATE', [sku]);
    locked.resolve();
    await held.promise;
  });
  await locked.promise;
  return async () => {
    held.resolve();
    await done;
  };
}
