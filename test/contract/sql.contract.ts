import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { SqlDatabase } from '../../shared/index.js';
import { ConstraintViolationError, UniqueViolationError } from '../../shared/index.js';

/**
 * The SQL port's contract, written once and run against every adapter (node-postgres, RDS Data
 * API through its local endpoint) on a migrated database of the test file's own.
 */
export function runSqlContract(options: { name: string; db: () => SqlDatabase }): void {
  describe(`SQL port contract: ${options.name}`, () => {
    const db = () => options.db();

    it("carries every parameter type both ways: uuid, text, integer, boolean, null, jsonb, timestamptz (typed by the statement's casts)", async () => {
      const id = randomUUID();
      const at = new Date('2026-11-29T10:11:12.345Z');
      await db().query(
        `INSERT INTO outbox (id, event_type, schema_version, aggregate_type, aggregate_id, aggregate_version,
           payload, producer, correlation_id, causation_id, occurred_at)
         VALUES ($1::uuid, 'order.created', '1.0', 'order', $2, $3, $4::jsonb, 'contract', 'c', $5, $6::timestamptz)`,
        [id, 'agg-1', 3, JSON.stringify({ a: [1, 'x'], b: { c: true } }), null, at.toISOString()],
      );
      const { rows } = await db().query<{
        id: string;
        aggregate_version: number;
        payload: unknown;
        causation_id: string | null;
        occurred_at: Date;
        unpublished: boolean;
      }>(
        `SELECT id, aggregate_version, payload, causation_id, occurred_at, published_at IS NULL AS unpublished
           FROM outbox WHERE id = $1::uuid`,
        [id],
      );
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        id,
        aggregate_version: 3,
        payload: { a: [1, 'x'], b: { c: true } },
        causation_id: null,
        unpublished: true,
      });
      expect(new Date(rows[0]?.occurred_at as Date).toISOString()).toBe(at.toISOString());
    });

    it('passes sets as JSON (no array parameters) and reports affected rows', async () => {
      await db().query(
        `INSERT INTO stock (sku, available) VALUES ('c-1', 5), ('c-2', 5), ('c-3', 5)`,
      );
      const updated = await db().query(
        `UPDATE stock SET reserved = 1 WHERE sku = ANY (ARRAY(SELECT jsonb_array_elements_text($1::jsonb)))`,
        [JSON.stringify(['c-1', 'c-3'])],
      );
      expect(updated.rowCount).toBe(2);
      const { rows } = await db().query<{ sku: string; reserved: number }>(
        `SELECT sku, reserved FROM stock WHERE sku LIKE 'c-%' ORDER BY sku`,
      );
      expect(rows).toEqual([
        { sku: 'c-1', reserved: 1 },
        { sku: 'c-2', reserved: 0 },
        { sku: 'c-3', reserved: 1 },
      ]);
    });

    it('commits a transaction as a whole, and rolls it back as a whole on an error', async () => {
      const sku = `t-${randomUUID().slice(0, 8)}`;
      await db().transaction(async (tx) => {
        await tx.query('INSERT INTO stock (sku, available) VALUES ($1, 1)', [sku]);
        await tx.query('UPDATE stock SET available = 2 WHERE sku = $1', [sku]);
      });
      await expect(
        db().transaction(async (tx) => {
          await tx.query('UPDATE stock SET available = 9 WHERE sku = $1', [sku]);
          throw new Error('application says no');
        }),
      ).rejects.toThrow('application says no'); // application errors pass through unchanged
      const { rows } = await db().query<{ available: number }>(
        'SELECT available FROM stock WHERE sku = $1',
        [sku],
      );
      expect(rows[0]?.available).toBe(2);
    });

    it('maps unique and check violations to the port errors', async () => {
      const sku = `u-${randomUUID().slice(0, 8)}`;
      await db().query('INSERT INTO stock (sku, available) VALUES ($1, 1)', [sku]);
      await expect(
        db().query('INSERT INTO stock (sku, available) VALUES ($1, 1)', [sku]),
      ).rejects.toBeInstanceOf(UniqueViolationError);
      await expect(
        db().query('UPDATE stock SET reserved = 5 WHERE sku = $1', [sku]),
      ).rejects.toBeInstanceOf(ConstraintViolationError);
      await expect(
        db().transaction((tx) =>
          tx.query('INSERT INTO stock (sku, available) VALUES ($1, -1)', [`${sku}x`]),
        ),
      ).rejects.toBeInstanceOf(ConstraintViolationError);
    });

    it('RETURNING and ON CONFLICT DO NOTHING behave as on PostgreSQL (the inbox claim)', async () => {
      const id = randomUUID();
      const claim = () =>
        db().query<{ message_id: string }>(
          `INSERT INTO processed_messages (consumer_name, message_id) VALUES ('contract', $1::uuid)
           ON CONFLICT DO NOTHING RETURNING message_id`,
          [id],
        );
      expect((await claim()).rows).toEqual([{ message_id: id }]);
      expect((await claim()).rows).toEqual([]);
    });
  });
}
