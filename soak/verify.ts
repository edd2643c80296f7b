import { parseJournal } from '../devkit/processes.js';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { INVENTORY_CONSUMER } from '../shared/inventory/ReserveInventory.js';
import { ORDER_RESULTS_CONSUMER } from '../shared/orders/OrderResults.js';
import { SET_ASIDE_PREFIX } from '../shared/outbox/OutboxStore.js';
import type { Service } from '../shared/pipeline/schema.js';
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

interface VerifyInput {
  /** Each service's database: each is read for its own tables only. */
  dbs: Readonly<Record<Service, PgDatabase>>;
  plan: Plan;
  parked: Diagnosis[];
  journals: Journals;
  /** Bad outbox rows written during the run (soak/chaos.ts). */
  badRows?: readonly BadRow[];
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
export async function verify(input: VerifyInput) {
  const run = runFacts(input, await readEndState(input.dbs));
  const found = new Findings();
  checkOrdersStored(run, found);
  const outcomes = checkOutcomes(run, found);
  const duplicates = checkNothingTwice(run, found);
  checkInboxClaims(run, found);
  checkRejectionEvents(run, found);
  const stock = checkStock(run, found);
  const outbox = checkOutboxes(run, found);
  const parking = summarizeParking(run, found);
  return {
    ok: found.violations.length === 0,
    violations: found.violations,
    warnings: found.warnings,
    orders: orderCounts(run),
    outcomes,
    parking,
    duplicates,
    stock,
    outbox,
  };
}

/** Violations and warnings, in the order the checks find them. */
class Findings {
  readonly violations: string[] = [];
  readonly warnings: string[] = [];

  /** A violation when `items` is not empty: how many, and the first `limit` of them. */
  fail(what: string, items: unknown[], limit = 5): void {
    if (items.length > 0) {
      this.violations.push(
        `${what}: ${items.length} (e.g. ${JSON.stringify(items.slice(0, limit))})`,
      );
    }
  }
}

// --- the end state, read from the database

/** The rows the checks read, all read once the run has drained. */
type EndState = Awaited<ReturnType<typeof readEndState>>;

async function readEndState(dbs: Readonly<Record<Service, PgDatabase>>) {
  const { rows: orders } = await dbs.orders.query<{
    id: string;
    sku: string;
    quantity: number;
    created_event_id: string;
  }>('SELECT id, sku, quantity, created_event_id FROM orders');
  const { rows: reservations } = await dbs.inventory.query<{
    order_id: string;
    sku: string;
    quantity: number;
    status: string;
    message_id: string;
    reason: string | null;
  }>('SELECT order_id, sku, quantity, status, message_id, reason FROM reservations');
  const { rows: stock } = await dbs.inventory.query<{
    sku: string;
    available: number;
    reserved: number;
  }>('SELECT sku, available, reserved FROM stock');
  const { rows: outbox } = await dbs.orders.query<{
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
  const { rows: inventoryOutbox } = await dbs.inventory.query<{
    id: string;
    order_id: string;
    event_type: string;
    unpublished: boolean;
    needs_attention: boolean;
  }>(
    `SELECT id, payload ->> 'orderId' AS order_id, event_type, published_at IS NULL AS unpublished,
            needs_attention_at IS NOT NULL AS needs_attention FROM inventory_outbox`,
  );
  // Inventory's claims, in its database; the order side's results consumer (`order-results`, run
  // by the soak's consumer processes too) claims inventory's result events in the order service's.
  const { rows: claims } = await dbs.inventory.query<{ message_id: string; n: number }>(
    `SELECT message_id, count(*)::int AS n FROM processed_messages
      WHERE consumer_name = $1 GROUP BY message_id`,
    [INVENTORY_CONSUMER],
  );
  const { rows: resultClaims } = await dbs.orders.query<{ message_id: string }>(
    'SELECT message_id FROM processed_messages WHERE consumer_name = $1',
    [ORDER_RESULTS_CONSUMER],
  );
  return { orders, reservations, stock, outbox, inventoryOutbox, claims, resultClaims };
}

/** What the checks read: the input, the end state, and the lookups several checks share. */
type RunFacts = ReturnType<typeof runFacts>;

function runFacts(input: VerifyInput, state: EndState) {
  // the parked messages by id: one entry for a message parked twice
  const parkedById = new Map<string, Diagnosis>();
  for (const d of input.parked) if (d.messageId) parkedById.set(d.messageId, d);
  return {
    ...state,
    plan: input.plan,
    parked: input.parked,
    journals: input.journals,
    badRows: input.badRows ?? [],
    ordersById: new Map(state.orders.map((o) => [o.id, o])),
    reservationsByOrder: groupBy(state.reservations, (r) => r.order_id),
    parkedById,
    // the message ids inventory's inbox claimed
    claimed: new Set(state.claims.map((c) => c.message_id)),
  };
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const list = groups.get(key(item)) ?? [];
    list.push(item);
    groups.set(key(item), list);
  }
  return groups;
}

function countBy<T>(items: readonly T[], key: (item: T) => string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1);
  return counts;
}

// --- the checks, each adding what it finds wrong

/** Orders: none lost, none extra, as planned, one `order.created` event each. */
function checkOrdersStored(run: RunFacts, found: Findings): void {
  const planned = run.plan.orders;
  found.fail(
    'orders lost (planned, not in the database)',
    planned.filter((p) => !run.ordersById.has(p.orderId)).map((p) => p.orderId),
  );
  const plannedIds = new Set(planned.map((p) => p.orderId));
  found.fail(
    'orders nobody placed',
    run.orders.filter((o) => !plannedIds.has(o.id)).map((o) => o.id),
  );
  found.fail(
    'orders stored with another sku or quantity',
    planned.filter((p) => {
      const o = run.ordersById.get(p.orderId);
      return o && (o.sku !== p.sku || o.quantity !== p.quantity);
    }),
  );
  const createdEvents = countBy(
    run.outbox.filter((e) => e.event_type === 'order.created'),
    (e) => e.aggregate_id,
  );
  found.fail(
    'orders without exactly one order.created event',
    run.orders.filter((o) => createdEvents.get(o.id) !== 1).map((o) => o.id),
  );
}

/**
 * The planned orders that are in the database, with what became of their `order.created` event:
 * the first reservation (a second one is a violation of its own), how many, the parking.
 */
type StoredOrder = ReturnType<typeof storedOrders>[number];

function storedOrders(run: RunFacts) {
  return run.plan.orders.flatMap((planned) => {
    const order = run.ordersById.get(planned.orderId);
    if (!order) return [];
    const rs = run.reservationsByOrder.get(planned.orderId) ?? [];
    const parking = run.parkedById.get(order.created_event_id);
    return [{ planned, order, reservation: rs[0], reservations: rs.length, parking }];
  });
}

/**
 * Outcomes: every valid order reserved or rejected as its reservation says (parked: a warning),
 * every poison event parked without a reservation, every parked message one of this run's order
 * events with a diagnosis.
 */
function checkOutcomes(run: RunFacts, found: Findings) {
  const stored = storedOrders(run);
  const poison = stored.filter((s) => s.planned.poison);
  const valid = stored.filter((s) => !s.planned.poison);
  const unreserved = valid.filter((s) => !s.reservation);
  const parkedValid = unreserved.flatMap((s) =>
    s.parking ? [[s.planned, s.parking] as const] : [],
  );
  for (const [planned, d] of parkedValid) {
    found.warnings.push(
      `valid order ${planned.orderId} parked: ${d.reason} / ${d.errorClass}: ${d.error.slice(0, 120)}`,
    );
  }
  const undecided = unreserved.filter((s) => !s.parking).map((s) => s.planned.orderId);
  const reservations = valid.flatMap((s) => (s.reservation ? [s.reservation] : []));
  const decided = (status: string, reason: string | null) =>
    reservations.filter((r) => r.status === status && r.reason === reason).length;
  const outcomes = {
    reserved: reservations.filter((r) => r.status === 'reserved').length,
    rejected: {
      out_of_stock: decided('rejected', 'out_of_stock'),
      unknown_sku: decided('rejected', 'unknown_sku'),
    },
    parked: { poison: poison.filter((s) => s.parking).length, valid: parkedValid.length },
    undecided: undecided.length,
  };
  found.fail('valid orders neither reserved, rejected nor parked', undecided);
  found.fail(
    'poison events not parked',
    poison.filter((s) => !s.parking).map((s) => `${s.planned.orderId} (${s.planned.poison})`),
  );
  found.fail(
    'poison events with a reservation',
    poison.filter((s) => s.reservations > 0).map((s) => s.planned.orderId),
  );
  found.fail('reservations that do not match their order or event', valid.flatMap(wrongEffect), 3);
  found.fail(
    'parked messages without a diagnosis',
    stored.filter((s) => s.parking && !s.parking.error).map((s) => s.order.created_event_id),
  );
  const eventIds = new Set(stored.map((s) => s.order.created_event_id));
  found.fail(
    'parked messages that are no order event of this run',
    run.parked.filter((d) => !d.messageId || !eventIds.has(d.messageId)).map((d) => d.messageId),
  );
  return outcomes;
}

/** What is wrong with a valid order's reservation: its order, event, SKU, quantity or status. */
function wrongEffect({ planned, order, reservation: r }: StoredOrder): unknown[] {
  if (!r) return [];
  const wrong: unknown[] = [];
  if (
    r.message_id !== order.created_event_id ||
    r.sku !== planned.sku ||
    r.quantity !== planned.quantity
  ) {
    wrong.push({ order: planned.orderId, reservation: r });
  }
  const known =
    r.status === 'reserved' ||
    (r.status === 'rejected' && (r.reason === 'out_of_stock' || r.reason === 'unknown_sku'));
  if (!known) wrong.push({ order: planned.orderId, unexpectedStatus: r.status, reason: r.reason });
  return wrong;
}

/** Nothing twice: no effect committed twice (journal), no second reservation, no second claim. */
function checkNothingTwice(run: RunFacts, found: Findings) {
  const doubleEffects = [...run.journals.effects].filter(([, n]) => n > 1);
  found.fail('message ids with more than one committed effect (journal)', doubleEffects);
  const doubleReservations = [...run.reservationsByOrder].filter(([, rs]) => rs.length > 1);
  found.fail(
    'orders with more than one reservation',
    doubleReservations.map(([id]) => id),
  );
  found.fail(
    'message ids claimed twice in the inbox',
    run.claims.filter((c) => c.n > 1),
  );
  return {
    // deliveries of an already-processed message that the inbox absorbed
    absorbedByInbox: run.journals.duplicates,
    // message ids whose effect was committed more than once (must be 0)
    doubleEffects: doubleEffects.length,
    // orders with more than one reservation row or inbox claim (must be 0)
    doubleReservations: doubleReservations.length,
  };
}

/** An inbox claim per reservation, no other; the order side claims inventory's results only. */
function checkInboxClaims(run: RunFacts, found: Findings): void {
  found.fail(
    'reservations without their inbox claim',
    run.reservations.filter((r) => !run.claimed.has(r.message_id)).map((r) => r.order_id),
  );
  const effectIds = new Set(run.reservations.map((r) => r.message_id));
  found.fail(
    'inbox claims without a reservation',
    run.claims.filter((c) => !effectIds.has(c.message_id)).map((c) => c.message_id),
  );
  const resultIds = new Set(run.inventoryOutbox.map((e) => e.id));
  found.fail(
    'order-side claims of no inventory result',
    run.resultClaims.filter((c) => !resultIds.has(c.message_id)).map((c) => c.message_id),
  );
}

/** One `inventory.reservation_rejected` event per rejected order, and none for another. */
function checkRejectionEvents(run: RunFacts, found: Findings): void {
  const rejectedOrders = new Set(
    run.reservations.filter((r) => r.status === 'rejected').map((r) => r.order_id),
  );
  const rejectionEvents = countBy(
    run.inventoryOutbox.filter((e) => e.event_type === 'inventory.reservation_rejected'),
    (e) => e.order_id,
  );
  found.fail(
    'rejected orders without exactly one rejection event',
    [...rejectedOrders].filter((id) => rejectionEvents.get(id) !== 1),
  );
  found.fail(
    'rejection events for orders that were not rejected',
    [...rejectionEvents.keys()].filter((id) => !rejectedOrders.has(id)),
  );
}

/** Stock arithmetic, per SKU, and every refusal right. */
function checkStock(run: RunFacts, found: Findings) {
  const mismatches = [...skuMismatches(run), ...wrongRefusals(run)];
  found.fail('stock arithmetic', mismatches, 10);
  const initialUnits = [...run.plan.stock.values()].reduce((a, b) => a + b, 0);
  const reservedUnits = run.stock.reduce((a, s) => a + s.reserved, 0);
  return {
    skus: run.plan.stock.size,
    initialUnits,
    reservedUnits,
    freeUnits: initialUnits - reservedUnits,
    mismatches,
  };
}

/** Per planned SKU: units on hand unchanged, reserved = Σ reserved quantities, never negative. */
function skuMismatches(run: RunFacts): string[] {
  const mismatches: string[] = [];
  const reservedBySku = new Map<string, number>();
  for (const r of run.reservations) {
    if (r.status === 'reserved') {
      reservedBySku.set(r.sku, (reservedBySku.get(r.sku) ?? 0) + r.quantity);
    }
  }
  const stockBySku = new Map(run.stock.map((s) => [s.sku, s]));
  for (const [sku, initial] of run.plan.stock) {
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
    if (!run.plan.stock.has(sku)) mismatches.push(`${sku}: reserved, but the SKU has no stock row`);
  }
  return mismatches;
}

/**
 * A refusal is right only if the order did not fit: free units never grow in this run (no
 * cancellations), so if it fits at the end it fitted when it was refused.
 */
function wrongRefusals(run: RunFacts): string[] {
  const mismatches: string[] = [];
  const stockBySku = new Map(run.stock.map((s) => [s.sku, s]));
  for (const r of run.reservations) {
    if (r.status !== 'rejected') continue;
    const s = stockBySku.get(r.sku);
    if (r.reason === 'unknown_sku' && s) mismatches.push(`${r.order_id}: unknown_sku for ${r.sku}`);
    if (r.reason === 'out_of_stock' && (!s || s.available - s.reserved >= r.quantity)) {
      mismatches.push(
        `${r.order_id}: out_of_stock for ${r.quantity} × ${r.sku}, yet ${s ? s.available - s.reserved : 0} free`,
      );
    }
  }
  return mismatches;
}

/** Both outboxes published, but for the bad rows: set aside with their reason, never consumed. */
function checkOutboxes(run: RunFacts, found: Findings) {
  const { setAside, setAsideReasons } = checkBadRows(run, found);
  const badIds = new Set(run.badRows.map((b) => b.id));
  const good = run.outbox.filter((e) => !badIds.has(e.id));
  const outbox = {
    rows: run.outbox.length,
    unpublished: good.filter((e) => e.unpublished).length,
    needsAttention: good.filter((e) => e.needs_attention).length,
    inventoryRows: run.inventoryOutbox.length,
    inventoryUnpublished: run.inventoryOutbox.filter((e) => e.unpublished).length,
    inventoryNeedsAttention: run.inventoryOutbox.filter((e) => e.needs_attention).length,
    // the bad rows the chaos wrote, how many the relay set aside with the right reason, and the
    // reasons it recorded (`last_error` of the set-aside rows), a few
    badRows: run.badRows.length,
    setAside,
    setAsideReasons: setAsideReasons.slice(0, 5),
  };
  if (outbox.unpublished + outbox.inventoryUnpublished > 0) {
    found.violations.push(
      `outbox not fully published: ${outbox.unpublished} in outbox, ${outbox.inventoryUnpublished} in inventory_outbox (${outbox.needsAttention + outbox.inventoryNeedsAttention} need attention; the ${run.badRows.length} bad rows not counted)`,
    );
  }
  return outbox;
}

/** Each bad row the chaos wrote: set aside by the relay with its reason, never consumed. */
function checkBadRows(
  run: RunFacts,
  found: Findings,
): { setAside: number; setAsideReasons: string[] } {
  const outboxById = new Map(run.outbox.map((e) => [e.id, e]));
  const notSetAside: unknown[] = [];
  const setAsideReasons: string[] = [];
  for (const b of run.badRows) {
    const row = outboxById.get(b.id);
    const error = row?.last_error ?? '';
    if (
      row?.unpublished &&
      row.needs_attention &&
      error.startsWith(SET_ASIDE_PREFIX) &&
      error.includes(b.reason)
    ) {
      setAsideReasons.push(`${b.kind}: ${error.slice(SET_ASIDE_PREFIX.length, 160)}`);
    } else {
      notSetAside.push({ ...b, row: row ?? 'missing' });
    }
  }
  found.fail('bad outbox rows not set aside with their reason', notSetAside, 3);
  found.fail(
    'bad outbox rows that reached the consumer',
    run.badRows.filter((b) => run.claimed.has(b.id) || run.parkedById.has(b.id)).map((b) => b.id),
  );
  return { setAside: setAsideReasons.length, setAsideReasons };
}

/** The parking lot: messages by reason and a few samples; a message parked twice is a warning. */
function summarizeParking(run: RunFacts, found: Findings) {
  const { parked, parkedById } = run;
  if (parked.length > parkedById.size) {
    found.warnings.push(
      `${parked.length - parkedById.size} parked copies of an already parked message (a consumer died between parking and acking)`,
    );
  }
  return {
    messages: parked.length,
    distinctIds: parkedById.size,
    byReason: Object.fromEntries(countBy(parked, (d) => `${d.reason}/${d.errorClass}`)),
    samples: [...parkedById.values()].slice(0, 5).map((d) => ({
      messageId: d.messageId,
      reason: d.reason,
      errorClass: d.errorClass,
      error: d.error.slice(0, 160),
    })),
  };
}

function orderCounts(run: RunFacts) {
  const planned = run.plan.orders;
  return {
    planned: planned.length,
    valid: planned.filter((p) => !p.poison).length,
    poison: planned.filter((p) => p.poison).length,
    inDatabase: run.orders.length,
  };
}
