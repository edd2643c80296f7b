import { parseJournal } from '../devkit/processes.js';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { INVENTORY_CONSUMER } from '../shared/inventory/ReserveInventory.js';
import { ORDER_RESULTS_CONSUMER } from '../shared/orders/OrderResults.js';
import { SET_ASIDE_PREFIX } from '../shared/outbox/OutboxStore.js';
import type { Diagnosis } from '../shared/port/types.js';
import type { BadRow } from './chaos.js';
import type { Plan } from './plan.js';

/** What the consumer processes' journal lines say, over every incarnation. */
export interface Journals {
  /** `effect-committed` lines per message id. */
  effects: Map<string, number>;
  /** Deliveries the inbox absorbed (`duplicate` lines). */
  duplicates: number;
  received: number;
}

/** Reads the journal lines (Powertools JSON, `message: "journal"`) out of consumer logs. */
export function readJournals(logs: string): Journals {
  const out: Journals = { effects: new Map(), duplicates: 0, received: 0 };
  for (const { step, messageId } of parseJournal(logs)) {
    if (step === 'received') out.received++;
    if (step === 'duplicate') out.duplicates++;
    if (step === 'effect-committed' && messageId) {
      out.effects.set(messageId, (out.effects.get(messageId) ?? 0) + 1);
    }
  }
  return out;
}

export interface SoakVerdict {
  ok: boolean;
  violations: string[];
  /** Things that are allowed but worth a look (e.g. a valid order parked after its budget). */
  warnings: string[];
  orders: { planned: number; valid: number; poison: number; inDatabase: number };
  outcomes: {
    reserved: number;
    rejected: { out_of_stock: number; unknown_sku: number };
    parked: { poison: number; valid: number };
    undecided: number;
  };
  parking: {
    messages: number;
    distinctIds: number;
    byReason: Record<string, number>;
    samples: { messageId: string | null; reason: string; errorClass: string; error: string }[];
  };
  duplicates: {
    /** Deliveries of an already-processed message that the inbox absorbed. */
    absorbedByInbox: number;
    /** Message ids whose effect was committed more than once (must be 0). */
    doubleEffects: number;
    /** Orders with more than one reservation row or inbox claim (must be 0). */
    doubleReservations: number;
  };
  stock: {
    skus: number;
    initialUnits: number;
    reservedUnits: number;
    freeUnits: number;
    mismatches: string[];
  };
  outbox: {
    rows: number;
    unpublished: number;
    needsAttention: number;
    inventoryRows: number;
    inventoryUnpublished: number;
    inventoryNeedsAttention: number;
    /** Bad rows the chaos wrote, and how many of them the relay set aside with the right reason. */
    badRows: number;
    setAside: number;
    /** The reasons the relay recorded (`last_error` of the set-aside rows), a few. */
    setAsideReasons: string[];
  };
}

/**
 * The end state the soak must reach, checked against the plan and the database:
 * - every planned order is in `orders` (none lost, none extra) with one `order.created` event;
 * - every valid order is reserved or rejected (or parked with a diagnosis: a warning), every poison
 *   event parked with a diagnosis and without a reservation;
 * - no effect twice: one reservation and one inbox claim per order, no message id with two
 *   `effect-committed` journal lines, one rejection event per rejected order;
 * - stock arithmetic exact per SKU: units on hand unchanged, reserved = Σ reserved quantities,
 *   and an `out_of_stock` rejection only where the free units at the end are below the quantity;
 * - both outboxes fully published, nothing needing attention, but for the bad rows the chaos
 *   wrote: each set aside by the relay with its reason, never published, never consumed.
 */
export async function verify(input: {
  db: PgDatabase;
  plan: Plan;
  parked: Diagnosis[];
  journals: Journals;
  /** Bad outbox rows written during the run (soak/chaos.ts). */
  badRows?: readonly BadRow[];
}): Promise<SoakVerdict> {
  const { db, plan, parked, journals } = input;
  const badRows = input.badRows ?? [];
  const badIds = new Set(badRows.map((b) => b.id));
  const violations: string[] = [];
  const warnings: string[] = [];
  const fail = (what: string, items: unknown[], limit = 5) => {
    if (items.length > 0) {
      violations.push(`${what}: ${items.length} (e.g. ${JSON.stringify(items.slice(0, limit))})`);
    }
  };

  const { rows: orders } = await db.query<{
    id: string;
    sku: string;
    quantity: number;
    created_event_id: string;
  }>('SELECT id, sku, quantity, created_event_id FROM orders');
  const { rows: reservations } = await db.query<{
    order_id: string;
    sku: string;
    quantity: number;
    status: string;
    message_id: string;
    reason: string | null;
  }>('SELECT order_id, sku, quantity, status, message_id, reason FROM reservations');
  const { rows: stock } = await db.query<{ sku: string; available: number; reserved: number }>(
    'SELECT sku, available, reserved FROM stock',
  );
  const { rows: outboxRows } = await db.query<{
    id: string;
    aggregate_id: string;
    event_type: string;
    unpublished: boolean;
    needs_attention: boolean;
    last_error: string | null;
  }>(
    `SELECT id, aggregate_id, event_type, published_at IS NULL AS unpublished,
            needs_attention_at IS NOT NULL AS needs_attention, last_error FROM outbox`,
  );
  const { rows: inventoryRows } = await db.query<{
    id: string;
    order_id: string;
    event_type: string;
    unpublished: boolean;
    needs_attention: boolean;
  }>(
    `SELECT id, payload ->> 'orderId' AS order_id, event_type, published_at IS NULL AS unpublished,
            needs_attention_at IS NOT NULL AS needs_attention FROM inventory_outbox`,
  );
  // Inventory's claims; the order side's results consumer (`order-results`, run by the soak's
  // consumer processes too) claims inventory's result events in the same table.
  const { rows: claims } = await db.query<{ message_id: string; n: number }>(
    `SELECT message_id, count(*)::int AS n FROM processed_messages
      WHERE consumer_name = $1 GROUP BY message_id`,
    [INVENTORY_CONSUMER],
  );
  const { rows: resultClaims } = await db.query<{ message_id: string }>(
    'SELECT message_id FROM processed_messages WHERE consumer_name = $1',
    [ORDER_RESULTS_CONSUMER],
  );

  // --- orders: none lost, none extra, one created event each
  const byId = new Map(orders.map((o) => [o.id, o]));
  const planned = plan.orders;
  fail(
    'orders lost (planned, not in the database)',
    planned.filter((p) => !byId.has(p.orderId)).map((p) => p.orderId),
  );
  const plannedIds = new Set(planned.map((p) => p.orderId));
  fail(
    'orders nobody placed',
    orders.filter((o) => !plannedIds.has(o.id)).map((o) => o.id),
  );
  fail(
    'orders stored with another sku or quantity',
    planned.filter((p) => {
      const o = byId.get(p.orderId);
      return o && (o.sku !== p.sku || o.quantity !== p.quantity);
    }),
  );
  const createdEvents = new Map<string, number>();
  for (const e of outboxRows) {
    if (e.event_type === 'order.created') {
      createdEvents.set(e.aggregate_id, (createdEvents.get(e.aggregate_id) ?? 0) + 1);
    }
  }
  fail(
    'orders without exactly one order.created event',
    orders.filter((o) => createdEvents.get(o.id) !== 1).map((o) => o.id),
  );

  // --- outcomes
  const parkedById = new Map<string, Diagnosis>();
  for (const d of parked) if (d.messageId) parkedById.set(d.messageId, d);
  const reservationsByOrder = new Map<string, typeof reservations>();
  for (const r of reservations) {
    const list = reservationsByOrder.get(r.order_id) ?? [];
    list.push(r);
    reservationsByOrder.set(r.order_id, list);
  }
  const outcomes: SoakVerdict['outcomes'] = {
    reserved: 0,
    rejected: { out_of_stock: 0, unknown_sku: 0 },
    parked: { poison: 0, valid: 0 },
    undecided: 0,
  };
  const undecided: string[] = [];
  const poisonNotParked: string[] = [];
  const poisonReserved: string[] = [];
  const wrongEffect: unknown[] = [];
  const diagnosisMissing: string[] = [];
  const eventIds = new Set<string>();
  for (const p of planned) {
    const o = byId.get(p.orderId);
    if (!o) continue;
    eventIds.add(o.created_event_id);
    const rs = reservationsByOrder.get(p.orderId) ?? [];
    const park = parkedById.get(o.created_event_id);
    if (park && !park.error) diagnosisMissing.push(o.created_event_id);
    if (p.poison) {
      if (rs.length > 0) poisonReserved.push(p.orderId);
      if (park) outcomes.parked.poison++;
      else poisonNotParked.push(`${p.orderId} (${p.poison})`);
      continue;
    }
    const r = rs[0];
    if (!r) {
      if (park) {
        outcomes.parked.valid++;
        warnings.push(
          `valid order ${p.orderId} parked: ${park.reason} / ${park.errorClass}: ${park.error.slice(0, 120)}`,
        );
      } else {
        outcomes.undecided++;
        undecided.push(p.orderId);
      }
      continue;
    }
    if (r.message_id !== o.created_event_id || r.sku !== p.sku || r.quantity !== p.quantity) {
      wrongEffect.push({ order: p.orderId, reservation: r });
    }
    if (r.status === 'reserved') outcomes.reserved++;
    else if (r.status === 'rejected' && r.reason === 'out_of_stock')
      outcomes.rejected.out_of_stock++;
    else if (r.status === 'rejected' && r.reason === 'unknown_sku') outcomes.rejected.unknown_sku++;
    else wrongEffect.push({ order: p.orderId, unexpectedStatus: r.status, reason: r.reason });
  }
  fail('valid orders neither reserved, rejected nor parked', undecided);
  fail('poison events not parked', poisonNotParked);
  fail('poison events with a reservation', poisonReserved);
  fail('reservations that do not match their order or event', wrongEffect, 3);
  fail('parked messages without a diagnosis', diagnosisMissing);
  fail(
    'parked messages that are no order event of this run',
    parked.filter((d) => !d.messageId || !eventIds.has(d.messageId)).map((d) => d.messageId),
  );

  // --- nothing twice
  const doubleEffects = [...journals.effects].filter(([, n]) => n > 1);
  fail('message ids with more than one committed effect (journal)', doubleEffects);
  const doubleReservations = [...reservationsByOrder].filter(([, rs]) => rs.length > 1);
  fail(
    'orders with more than one reservation',
    doubleReservations.map(([id]) => id),
  );
  const doubleClaims = claims.filter((c) => c.n > 1);
  fail('message ids claimed twice in the inbox', doubleClaims);
  const claimed = new Set(claims.map((c) => c.message_id));
  fail(
    'reservations without their inbox claim',
    reservations.filter((r) => !claimed.has(r.message_id)).map((r) => r.order_id),
  );
  const effectIds = new Set(reservations.map((r) => r.message_id));
  fail(
    'inbox claims without a reservation',
    claims.filter((c) => !effectIds.has(c.message_id)).map((c) => c.message_id),
  );
  const resultIds = new Set(inventoryRows.map((e) => e.id));
  fail(
    'order-side claims of no inventory result',
    resultClaims.filter((c) => !resultIds.has(c.message_id)).map((c) => c.message_id),
  );
  const rejectedOrders = new Set(
    reservations.filter((r) => r.status === 'rejected').map((r) => r.order_id),
  );
  const rejectionEvents = new Map<string, number>();
  for (const e of inventoryRows) {
    if (e.event_type === 'inventory.reservation_rejected') {
      rejectionEvents.set(e.order_id, (rejectionEvents.get(e.order_id) ?? 0) + 1);
    }
  }
  fail(
    'rejected orders without exactly one rejection event',
    [...rejectedOrders].filter((id) => rejectionEvents.get(id) !== 1),
  );
  fail(
    'rejection events for orders that were not rejected',
    [...rejectionEvents.keys()].filter((id) => !rejectedOrders.has(id)),
  );

  // --- stock arithmetic, per SKU
  const mismatches: string[] = [];
  const reservedBySku = new Map<string, number>();
  for (const r of reservations) {
    if (r.status === 'reserved') {
      reservedBySku.set(r.sku, (reservedBySku.get(r.sku) ?? 0) + r.quantity);
    }
  }
  const stockBySku = new Map(stock.map((s) => [s.sku, s]));
  for (const [sku, initial] of plan.stock) {
    const s = stockBySku.get(sku);
    const reserved = reservedBySku.get(sku) ?? 0;
    if (!s) {
      mismatches.push(`${sku}: stock row missing`);
      continue;
    }
    if (s.available !== initial)
      mismatches.push(`${sku}: on hand ${s.available} ≠ initial ${initial}`);
    if (s.reserved !== reserved) {
      mismatches.push(`${sku}: reserved ${s.reserved} ≠ Σ reservations ${reserved}`);
    }
    if (initial - s.reserved < 0) mismatches.push(`${sku}: free units negative`);
  }
  for (const sku of reservedBySku.keys()) {
    if (!plan.stock.has(sku)) mismatches.push(`${sku}: reserved, but the SKU has no stock row`);
  }
  // A refusal is right only if the order did not fit: free units never grow in this run (no
  // cancellations), so if it fits at the end it fitted when it was refused.
  for (const r of reservations) {
    if (r.status !== 'rejected') continue;
    const s = stockBySku.get(r.sku);
    if (r.reason === 'unknown_sku' && s) mismatches.push(`${r.order_id}: unknown_sku for ${r.sku}`);
    if (r.reason === 'out_of_stock' && (!s || s.available - s.reserved >= r.quantity)) {
      mismatches.push(
        `${r.order_id}: out_of_stock for ${r.quantity} × ${r.sku}, yet ${s ? s.available - s.reserved : 0} free`,
      );
    }
  }
  fail('stock arithmetic', mismatches, 10);
  const initialUnits = [...plan.stock.values()].reduce((a, b) => a + b, 0);
  const reservedUnits = stock.reduce((a, s) => a + s.reserved, 0);

  // --- outboxes: the bad rows set aside with their reason, never published nor consumed
  const outboxById = new Map(outboxRows.map((e) => [e.id, e]));
  const setAsideWrong: unknown[] = [];
  const setAsideReasons: string[] = [];
  let setAside = 0;
  for (const b of badRows) {
    const row = outboxById.get(b.id);
    const error = row?.last_error ?? '';
    if (
      row?.unpublished &&
      row.needs_attention &&
      error.startsWith(SET_ASIDE_PREFIX) &&
      error.includes(b.reason)
    ) {
      setAside++;
      setAsideReasons.push(`${b.kind}: ${error.slice(SET_ASIDE_PREFIX.length, 160)}`);
    } else {
      setAsideWrong.push({ ...b, row: row ?? 'missing' });
    }
  }
  fail('bad outbox rows not set aside with their reason', setAsideWrong, 3);
  fail(
    'bad outbox rows that reached the consumer',
    badRows.filter((b) => claimed.has(b.id) || parkedById.has(b.id)).map((b) => b.id),
  );
  const goodOutboxRows = outboxRows.filter((e) => !badIds.has(e.id));
  const outbox = {
    rows: outboxRows.length,
    unpublished: goodOutboxRows.filter((e) => e.unpublished).length,
    needsAttention: goodOutboxRows.filter((e) => e.needs_attention).length,
    inventoryRows: inventoryRows.length,
    inventoryUnpublished: inventoryRows.filter((e) => e.unpublished).length,
    inventoryNeedsAttention: inventoryRows.filter((e) => e.needs_attention).length,
    badRows: badRows.length,
    setAside,
    setAsideReasons: setAsideReasons.slice(0, 5),
  };
  if (outbox.unpublished + outbox.inventoryUnpublished > 0) {
    violations.push(
      `outbox not fully published: ${outbox.unpublished} in outbox, ${outbox.inventoryUnpublished} in inventory_outbox (${outbox.needsAttention + outbox.inventoryNeedsAttention} need attention; the ${badRows.length} bad rows not counted)`,
    );
  }

  const byReason: Record<string, number> = {};
  for (const d of parked) {
    const k = `${d.reason}/${d.errorClass}`;
    byReason[k] = (byReason[k] ?? 0) + 1;
  }
  if (parked.length > parkedById.size) {
    warnings.push(
      `${parked.length - parkedById.size} parked copies of an already parked message (a consumer died between parking and acking)`,
    );
  }
  return {
    ok: violations.length === 0,
    violations,
    warnings,
    orders: {
      planned: planned.length,
      valid: planned.filter((p) => !p.poison).length,
      poison: planned.filter((p) => p.poison).length,
      inDatabase: orders.length,
    },
    outcomes,
    parking: {
      messages: parked.length,
      distinctIds: parkedById.size,
      byReason,
      samples: [...parkedById.values()].slice(0, 5).map((d) => ({
        messageId: d.messageId,
        reason: d.reason,
        errorClass: d.errorClass,
        error: d.error.slice(0, 160),
      })),
    },
    duplicates: {
      absorbedByInbox: journals.duplicates,
      doubleEffects: doubleEffects.length,
      doubleReservations: doubleReservations.length,
    },
    stock: {
      skus: plan.stock.size,
      initialUnits,
      reservedUnits,
      freeUnits: initialUnits - reservedUnits,
      mismatches,
    },
    outbox,
  };
}
