import { type Envelope, type Inbox, OutboxStore, type SqlExecutor } from '../index.js';
import type { LockedBatch, ReservationState } from './decide.js';
import type { StockLevel } from './stock.js';

/** What a batch touches: its messages, orders and skus. */
export interface BatchKeys {
  messageIds: readonly string[];
  orderIds: readonly string[];
  skus: readonly string[];
}

/** What a batch writes (see `decideBatch`), and the result events it raises. */
export interface BatchWrite {
  /** Messages whose inbox claim is undone (deferred, invalid). */
  deferred: readonly string[];
  /** The new reserved units of the stock rows that changed. */
  stock: readonly Pick<StockLevel, 'sku' | 'reserved'>[];
  /** New reservation rows, by order id. */
  states: ReadonlyMap<string, ReservationState>;
  /** Events for `inventory_outbox`. */
  events: readonly Envelope[];
}

/** JSON text of the distinct values, sorted: rows are locked in that order. */
const sortedSet = (values: readonly string[]) => JSON.stringify([...new Set(values)].sort());

/**
 * The SQL of a batch of reservations: two statements, one round trip each, whatever the batch
 * size. Both run inside the caller's transaction; the inbox claim therefore commits with the
 * stock, reservation and outbox writes, or not at all.
 */
export class InventoryStore {
  private readonly outbox = new OutboxStore('inventory_outbox');
  private readonly readSql: string;
  private readonly writeSql: string;

  constructor(private readonly inbox: Inbox) {
    // Built once: the statement texts never vary, so each is prepared once per connection.
    this.readSql = `WITH claim AS (
         ${inbox.claimSql(1)}),
       states AS (
         SELECT order_id, status, order_version, quantity, sku, message_id, reason FROM reservations
          WHERE order_id = ANY (ARRAY(SELECT jsonb_array_elements_text($3::jsonb)::uuid))
          ORDER BY order_id FOR UPDATE),
       stock_rows AS (
         SELECT sku, available, reserved FROM stock
          WHERE sku = ANY (ARRAY(SELECT jsonb_array_elements_text($4::jsonb)))
          ORDER BY sku FOR UPDATE)
       SELECT (SELECT coalesce(json_agg(message_id), '[]') FROM claim) AS claimed,
              (SELECT coalesce(json_agg(states), '[]') FROM states) AS states,
              (SELECT coalesce(json_agg(stock_rows), '[]') FROM stock_rows) AS stock`;
    this.writeSql = `WITH undo AS (
         ${inbox.undoSql(1)}),
       stock_update AS (
         UPDATE stock s SET reserved = d.reserved, updated_at = now()
           FROM jsonb_to_recordset($3::jsonb) AS d(sku text, reserved integer)
          WHERE s.sku = d.sku
            AND s.sku = ANY (ARRAY(SELECT x ->> 'sku' FROM jsonb_array_elements($3::jsonb) AS x))),
       state_upsert AS (
         INSERT INTO reservations (order_id, sku, quantity, status, message_id, order_version, reason)
         SELECT r.order_id, r.sku, r.quantity, r.status, r.message_id, r.order_version, r.reason
           FROM jsonb_to_recordset($4::jsonb) AS r(order_id uuid, sku text, quantity integer,
                status text, message_id uuid, order_version integer, reason text)
         ON CONFLICT (order_id) DO UPDATE SET status = EXCLUDED.status, message_id = EXCLUDED.message_id,
           order_version = EXCLUDED.order_version, reason = EXCLUDED.reason, updated_at = now()),
       events AS (${this.outbox.insertManySql(5)})
       SELECT 1`;
  }

  /**
   * Read phase, one round trip: claims every message in the inbox and locks the reservation rows
   * and stock rows the batch touches. Each set is locked in sorted order, inbox first and stock
   * (the hot rows) last, so that two batches never wait on each other in a cycle.
   */
  async lock(tx: SqlExecutor, keys: BatchKeys): Promise<LockedBatch> {
    const { rows } = await tx.query<{
      claimed: string[];
      states: (ReservationState & { order_id: string })[];
      stock: StockLevel[];
    }>(this.readSql, [
      ...this.inbox.claimParams(keys.messageIds),
      sortedSet(keys.orderIds),
      sortedSet(keys.skus),
    ]);
    const read = rows[0];
    return {
      claimed: read?.claimed ?? [],
      states: new Map((read?.states ?? []).map(({ order_id, ...state }) => [order_id, state])),
      stock: read?.stock ?? [],
    };
  }

  /**
   * Write phase, one round trip: undoes the claims of deferred and invalid messages, then writes the stock
   * reservations (the CHECK constraints guard them too), the reservation rows and the events.
   */
  async write(tx: SqlExecutor, batch: BatchWrite): Promise<void> {
    await tx.query(this.writeSql, [
      ...this.inbox.undoParams(batch.deferred),
      JSON.stringify(batch.stock.map((s) => ({ sku: s.sku, reserved: s.reserved }))),
      JSON.stringify([...batch.states].map(([order_id, state]) => ({ order_id, ...state }))),
      OutboxStore.recordset(batch.events),
    ]);
  }
}
