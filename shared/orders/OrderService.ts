import { randomUUID } from 'node:crypto';
import { fault, newEnvelope, OutboxStore, type SqlDatabase, type SqlExecutor } from '../index.js';
import { AGGREGATE_TYPES, EVENT_TYPES, PRODUCERS } from '../pipeline/constants.js';
import { OrderConflictError, OrderNotFoundError } from './errors.js';

export interface PlaceOrderCommand {
  sku: string;
  quantity: number;
  /** Client-chosen id: placing the same id again returns the same order and writes no event. */
  orderId?: string | undefined;
  correlationId: string;
}

export interface PlaceOrderResult {
  orderId: string;
  eventId: string;
  /** false when the order already existed (idempotent repeat). */
  created: boolean;
}

/**
 * What the order side knows of its reservation: `pending` until inventory answered; `quarantined`
 * while inventory has the order's event parked (no decision until an operator redrives it).
 */
export type ReservationStatus = 'pending' | 'reserved' | 'rejected' | 'released' | 'quarantined';

export interface OrderView {
  orderId: string;
  sku: string;
  quantity: number;
  status: 'placed' | 'cancelled';
  version: number;
  createdAt: string;
  updatedAt: string;
  /** `parkedAt` (ISO) only while `quarantined`: when inventory parked the order's event. */
  reservation: { status: ReservationStatus; reason: string | null; parkedAt?: string };
}

interface OrderRow {
  id: string;
  sku: string;
  quantity: number;
  status: 'placed' | 'cancelled';
  version: number;
  created_event_id: string;
  created_at: Date;
  updated_at: Date;
  /** From inventory's result events (`OrderResults`). */
  reservation_status: ReservationStatus;
  reservation_reason: string | null;
  reservation_parked_at: Date | string | null;
}

/**
 * Order placement with a transactional outbox: each order change and its event row commit in one
 * transaction, and the order's version is the event's `aggregate.version`.
 */
export class OrderService {
  private readonly outbox = new OutboxStore('outbox');

  constructor(private readonly deps: { db: SqlDatabase }) {}

  async place(cmd: PlaceOrderCommand): Promise<PlaceOrderResult> {
    const orderId = cmd.orderId ?? randomUUID();
    return this.deps.db.transaction(async (tx) => {
      const envelope = newEnvelope({
        type: EVENT_TYPES.orderCreated,
        aggregate: { type: AGGREGATE_TYPES.order, id: orderId, version: 1 },
        data: { orderId, sku: cmd.sku, quantity: cmd.quantity },
        correlationId: cmd.correlationId,
        producer: PRODUCERS.orderService,
      });
      // The order and its event in one statement (one round trip): the event row is written only
      // if the order row was. A concurrent twin with the same id waits on this row's lock, then
      // finds it below.
      const inserted = await tx.query(
        `WITH new_order AS (
           INSERT INTO orders (id, sku, quantity, created_event_id, correlation_id)
           VALUES ($1::uuid, $2, $3, $4::uuid, $5) ON CONFLICT (id) DO NOTHING RETURNING id)
         ${this.outbox.appendSql(6, 'new_order')}`,
        [
          orderId,
          cmd.sku,
          cmd.quantity,
          envelope.id,
          cmd.correlationId,
          ...OutboxStore.appendParams(envelope),
        ],
      );
      if (inserted.rowCount === 0) {
        const existing = await this.find(tx, orderId);
        if (!existing) throw new OrderNotFoundError(orderId); // deleted in between: not expected
        if (existing.sku !== cmd.sku) throw new OrderConflictError(orderId, 'sku');
        if (existing.quantity !== cmd.quantity) throw new OrderConflictError(orderId, 'quantity');
        return { orderId, eventId: existing.created_event_id, created: false };
      }
      fault('order.after-outbox-insert');
      return { orderId, eventId: envelope.id, created: true };
    });
  }

  /** Cancels a placed order (event `order.cancelled`); cancelling again changes nothing. */
  async cancel(
    orderId: string,
    correlationId: string,
  ): Promise<{ orderId: string; eventId: string | null; cancelled: boolean }> {
    return this.deps.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ version: number; sku: string; quantity: number }>(
        `UPDATE orders SET status = 'cancelled', version = version + 1, updated_at = now()
          WHERE id = $1::uuid AND status = 'placed' RETURNING version, sku, quantity`,
        [orderId],
      );
      const row = rows[0];
      if (!row) {
        const existing = await this.find(tx, orderId);
        if (!existing) throw new OrderNotFoundError(orderId);
        return { orderId, eventId: null, cancelled: false };
      }
      const envelope = newEnvelope({
        type: EVENT_TYPES.orderCancelled,
        aggregate: { type: AGGREGATE_TYPES.order, id: orderId, version: row.version },
        data: { orderId, sku: row.sku, quantity: row.quantity },
        correlationId,
        producer: PRODUCERS.orderService,
      });
      await this.outbox.append(tx, envelope);
      return { orderId, eventId: envelope.id, cancelled: true };
    });
  }

  /**
   * The order and its reservation status as the order side knows it: from inventory's result
   * events, recorded on the order by `OrderResults` (never read from inventory's tables);
   * `pending` until the first result arrived, `quarantined` (reason, parked time) while inventory
   * has its event parked.
   */
  async get(orderId: string): Promise<OrderView> {
    const row = await this.find(this.deps.db, orderId);
    if (!row) throw new OrderNotFoundError(orderId);
    return {
      orderId: row.id,
      sku: row.sku,
      quantity: row.quantity,
      status: row.status,
      version: row.version,
      createdAt: new Date(row.created_at).toISOString(),
      updatedAt: new Date(row.updated_at).toISOString(),
      reservation: {
        status: row.reservation_status,
        reason: row.reservation_reason,
        ...(row.reservation_parked_at
          ? { parkedAt: new Date(row.reservation_parked_at).toISOString() }
          : {}),
      },
    };
  }

  private async find(tx: SqlExecutor, orderId: string): Promise<OrderRow | undefined> {
    const { rows } = await tx.query<OrderRow>('SELECT * FROM orders WHERE id = $1::uuid', [
      orderId,
    ]);
    return rows[0];
  }
}
