import { EVENT_TYPES } from '../pipeline/constants.js';
import type { ReservationRejectedData } from '../pipeline/events.js';
import type { StockLevel } from './stock.js';

/**
 * What inventory decides for one order event, as pure functions: no I/O, no clock. The caller
 * reads and locks the rows a batch touches (see `store.ts`), decides each message in order on
 * that state, and writes the result; `decideBatch` is that loop.
 */

/** The result of a message that was processed (acknowledged). */
export type ReservationResult =
  | 'reserved'
  | 'rejected'
  | 'released'
  | 'duplicate'
  | 'stale'
  | 'noop';

export type RejectReason = ReservationRejectedData['reason'];

/** An order's reservation row (`reservations`, without its key). */
export interface ReservationState {
  status: 'reserved' | 'rejected' | 'released';
  /** The `aggregate.version` of the last event applied to this order. */
  order_version: number;
  quantity: number;
  sku: string;
  /** The message that produced this state. */
  message_id: string;
  reason: string | null;
}

/** The part of a decoded order event that decides its effect. */
export interface OrderEvent {
  messageId: string;
  type: typeof EVENT_TYPES.orderCreated | typeof EVENT_TYPES.orderCancelled;
  /** `aggregate.version`: the events of one order apply in version order, without gaps. */
  version: number;
  orderId: string;
  sku: string;
  quantity: number;
}

/** A change of a stock row's reserved units (negative: units released). */
export interface StockDelta {
  sku: string;
  reserved: number;
}

export type Decision =
  /** Not claimed now: already processed, or earlier in the same batch. */
  | { kind: 'duplicate' }
  /** A predecessor is missing (version > last + 1): undo the claim, try again later. */
  | { kind: 'deferred' }
  /** Already superseded (version ≤ last): acknowledged without effect. */
  | { kind: 'stale' }
  | { kind: 'reserved'; state: ReservationState; stock: StockDelta }
  /** Refused: the order is recorded as rejected and a rejection event is due. */
  | { kind: 'rejected'; state: ReservationState; reason: RejectReason; free: number }
  | { kind: 'released'; state: ReservationState; stock: StockDelta | undefined }
  /** Applied, but nothing to release (the order was rejected, released, or never seen). */
  | { kind: 'noop'; state: ReservationState }
  /**
   * Contradicts what was recorded for the order (a cancel naming another SKU than its
   * reservation): not applied, the claim undone, and parked as permanent with this diagnosis.
   */
  | { kind: 'invalid'; error: string };

/** What one message is decided on: the locked state of the batch as updated by earlier messages. */
export interface DecisionInput {
  /** The inbox claimed this message now (false: it was processed before). */
  fresh: boolean;
  /** The order's reservation, if any. */
  state: ReservationState | undefined;
  /** The stock rows of the batch, by sku; a sku absent here is unknown. */
  stock: ReadonlyMap<string, Readonly<StockLevel>>;
}

/** Decides one message. */
export function decide(event: OrderEvent, input: DecisionInput): Decision {
  if (!input.fresh) return { kind: 'duplicate' };
  const { state } = input;
  const last = state?.order_version ?? 0;
  if (event.version > last + 1) return { kind: 'deferred' };
  if (event.version <= last) return { kind: 'stale' };

  if (event.type === EVENT_TYPES.orderCreated) {
    const s = input.stock.get(event.sku);
    const next = (status: ReservationState['status'], reason: string | null) => ({
      status,
      order_version: event.version,
      quantity: event.quantity,
      sku: event.sku,
      message_id: event.messageId,
      reason,
    });
    if (s && s.available - s.reserved >= event.quantity) {
      return {
        kind: 'reserved',
        state: next('reserved', null),
        stock: { sku: event.sku, reserved: event.quantity },
      };
    }
    const reason: RejectReason = s ? 'out_of_stock' : 'unknown_sku';
    return {
      kind: 'rejected',
      state: next('rejected', reason),
      reason,
      free: s ? Math.max(0, s.available - s.reserved) : 0,
    };
  }

  // order.cancelled: release what this order holds, on the sku it was reserved on. A cancel
  // that names another sku is not about this reservation: releasing anyway would touch a stock
  // row nobody asked for, and marking it released without releasing would lose units.
  if (state && state.sku !== event.sku) {
    return {
      kind: 'invalid',
      error: `order.cancelled names sku ${event.sku} but order ${event.orderId} was recorded with sku ${state.sku} (${state.status})`,
    };
  }
  const moved = { order_version: event.version, message_id: event.messageId };
  if (state?.status === 'reserved') {
    return {
      kind: 'released',
      state: { ...state, ...moved, status: 'released' },
      stock: input.stock.has(state.sku) ? { sku: state.sku, reserved: -state.quantity } : undefined,
    };
  }
  return {
    kind: 'noop',
    state: state
      ? { ...state, ...moved }
      : {
          status: 'released',
          quantity: event.quantity,
          sku: event.sku,
          reason: null,
          ...moved,
        },
  };
}

/** The rows a batch read and locked. */
export interface LockedBatch {
  /** Message ids the inbox claimed now. */
  claimed: Iterable<string>;
  /** Reservations by order id. */
  states: ReadonlyMap<string, ReservationState>;
  stock: readonly StockLevel[];
}

/** What a batch writes, and each message's decision (in order). */
export interface BatchDecision {
  decisions: Decision[];
  /** Messages whose inbox claim must be undone (deferred, invalid). */
  deferred: string[];
  /** The new reservation of each order a message changed, in first-change order. */
  states: Map<string, ReservationState>;
  /** The stock rows whose reserved units changed, with their new value (not a delta). */
  stock: Pick<StockLevel, 'sku' | 'reserved'>[];
}

/**
 * Decides the messages of a batch in order, each on the state left by the ones before it (two
 * events of one order, or two orders of one sku, in one batch), and a message that occurs twice
 * is a duplicate the second time. Does not modify `locked`.
 */
export function decideBatch(events: readonly OrderEvent[], locked: LockedBatch): BatchDecision {
  const fresh = new Set(locked.claimed);
  const states = new Map(locked.states);
  const stock = new Map(locked.stock.map((r) => [r.sku, { ...r }]));
  const decisions: Decision[] = [];
  const deferred: string[] = [];
  const changed = new Map<string, ReservationState>();
  for (const e of events) {
    const d = decide(e, { fresh: fresh.delete(e.messageId), state: states.get(e.orderId), stock });
    decisions.push(d);
    if (d.kind === 'deferred' || d.kind === 'invalid') deferred.push(e.messageId);
    if (!('state' in d)) continue;
    if ('stock' in d && d.stock) {
      const row = stock.get(d.stock.sku);
      if (row) row.reserved += d.stock.reserved;
    }
    states.set(e.orderId, d.state);
    changed.set(e.orderId, d.state);
  }
  const before = new Map(locked.stock.map((r) => [r.sku, r.reserved]));
  return {
    decisions,
    deferred,
    states: changed,
    stock: [...stock.values()]
      .filter((s) => before.get(s.sku) !== s.reserved)
      .map((s) => ({ sku: s.sku, reserved: s.reserved })),
  };
}
