import {
  decodeMessage,
  type Envelope,
  fault,
  type InboundMessage,
  Inbox,
  isInfrastructureError,
  type Journal,
  type Logger,
  newEnvelope,
  type Outcome,
  PermanentMessageError,
  type RetryBudget,
  RetryPolicy,
  type SqlDatabase,
  type SqlExecutor,
  shortError,
  uuidV5,
} from '../index.js';
import { EVENT_TYPES, PRODUCERS } from '../pipeline/constants.js';
import {
  dataSchemaFor,
  type OrderCancelledData,
  type OrderCreatedData,
  type ReleasedData,
  type ReservationRejectedData,
  type ReservedData,
} from '../pipeline/events.js';
import { type Decision, decideBatch, type OrderEvent, type ReservationResult } from './decide.js';
import { InventoryStore } from './store.js';

export type { ReservationResult } from './decide.js';

/** The inbox's consumer name for this use case (`processed_messages.consumer_name`). */
export const INVENTORY_CONSUMER = 'inventory';

/** The event types this use case handles; any other is a permanent error. */
const HANDLED_TYPES = [EVENT_TYPES.orderCreated, EVENT_TYPES.orderCancelled] as const;

export interface ReserveInventoryOptions {
  budget: RetryBudget;
  consumerName?: string;
  /** Clock, for age decisions (tests). */
  now?: () => number;
}

/** What a message came to in its transaction (`invalid`: refused, with its diagnosis). */
type Applied = ReservationResult | 'deferred' | { invalid: string };

interface Decoded {
  index: number;
  message: InboundMessage;
  envelope: Envelope;
  event: OrderEvent;
}

/**
 * Reserves stock for `order.created` and releases it for `order.cancelled`, exactly once per event,
 * whatever the transport redelivers: the use case plugged into the generic consumer pieces
 * (`decodeMessage`, the `Inbox`, the `RetryPolicy`).
 *
 * For each valid message, in one transaction: the inbox claim, the ordering check on
 * `aggregate.version`, the guarded stock update and the reservation row, and the result event for
 * the order side in `inventory_outbox` (`inventory.reserved`, `inventory.reservation_rejected`,
 * `inventory.released`) whose id is derived from the incoming message id. What each message does is decided by `decide.ts` (pure); the statements
 * that read and write are in `store.ts`.
 *
 * Several messages share one transaction (one COMMIT for the batch): each message's effect is
 * still decided on its own, and if the shared transaction fails, every message is processed
 * again on its own so that one bad message cannot decide the outcome of the others.
 */
export class ReserveInventory {
  private readonly consumer: string;
  private readonly store: InventoryStore;
  private readonly retry: RetryPolicy;

  constructor(
    private readonly deps: { db: SqlDatabase; logger?: Logger; journal?: Journal },
    options: ReserveInventoryOptions,
  ) {
    this.consumer = options.consumerName ?? INVENTORY_CONSUMER;
    this.store = new InventoryStore(new Inbox(this.consumer));
    this.retry = new RetryPolicy(options.budget, options.now ?? Date.now);
  }

  /** Returns one outcome per message, in order. Throws only for an injected fault. */
  async process(messages: readonly InboundMessage[]): Promise<Outcome[]> {
    const outcomes: (Outcome | undefined)[] = new Array(messages.length);
    const valid: Decoded[] = [];
    messages.forEach((message, index) => {
      this.journal('received', message, undefined);
      try {
        valid.push({ index, message, ...this.decode(message) });
      } catch (err) {
        outcomes[index] = this.failure(message, undefined, err);
      }
    });

    if (valid.length > 0) {
      let applied: Applied[] | undefined;
      try {
        applied = await this.deps.db.transaction((tx) => this.applyAll(tx, valid));
      } catch (err) {
        if (valid.length === 1) {
          const only = valid[0] as Decoded;
          outcomes[only.index] = this.failure(only.message, only.envelope, err);
        } else {
          this.deps.logger?.warn('batch transaction failed; processing its messages one by one', {
            size: valid.length,
            error: shortError(err),
          });
        }
      }
      if (applied) {
        valid.forEach((d, i) => {
          outcomes[d.index] = this.settled(d, applied[i] as Applied);
        });
        fault('reserve.after-commit');
      } else if (valid.length > 1) {
        let unreachable: unknown;
        for (const d of valid) {
          if (unreachable !== undefined) {
            // the database cannot be reached at all: the rest would only wait for the same failure
            outcomes[d.index] = this.failure(d.message, d.envelope, unreachable);
            continue;
          }
          let one: Applied[];
          try {
            one = await this.deps.db.transaction((tx) => this.applyAll(tx, [d]));
          } catch (err) {
            outcomes[d.index] = this.failure(d.message, d.envelope, err);
            if (isInfrastructureError(err)) unreachable = err;
            continue;
          }
          outcomes[d.index] = this.settled(d, one[0] as Applied);
          fault('reserve.after-commit');
        }
      }
    }
    return outcomes as Outcome[];
  }

  /** The generic checks (see `decodeMessage`), then inventory's own: the event is about one order. */
  private decode(message: InboundMessage): { envelope: Envelope; event: OrderEvent } {
    const envelope = decodeMessage(message, {
      consumer: this.consumer,
      types: HANDLED_TYPES,
      schemaFor: dataSchemaFor,
    });
    const data = envelope.data as OrderCreatedData | OrderCancelledData;
    if (envelope.aggregate.id !== data.orderId) {
      throw new PermanentMessageError('aggregate.id differs from data.orderId');
    }
    const event: OrderEvent = {
      messageId: envelope.id,
      type: envelope.type as OrderEvent['type'],
      version: envelope.aggregate.version,
      orderId: data.orderId,
      sku: data.sku,
      quantity: data.quantity,
    };
    return { envelope, event };
  }

  /**
   * Applies a batch with a fixed number of statements, whatever its size: claim every message in
   * the inbox and lock the order states and stock rows it touches, decide each message in order in
   * memory (on the locked rows), then write the stock, the reservations and the result events in
   * bulk. Each message still gets its own decision.
   */
  private async applyAll(tx: SqlExecutor, batch: readonly Decoded[]): Promise<Applied[]> {
    const events = batch.map((d) => d.event);
    const locked = await this.store.lock(tx, {
      messageIds: events.map((e) => e.messageId),
      orderIds: events.map((e) => e.orderId),
      skus: events.map((e) => e.sku),
    });
    const decided = decideBatch(events, locked);
    const results = batch.flatMap((d, i) => {
      const event = this.result(d.envelope, d.event, decided.decisions[i] as Decision);
      return event ? [event] : [];
    });
    await this.store.write(tx, {
      deferred: decided.deferred,
      stock: decided.stock,
      states: decided.states,
      events: results,
    });
    return decided.decisions.map((d) => (d.kind === 'invalid' ? { invalid: d.error } : d.kind));
  }

  /**
   * The business result of a message, for the order side: `inventory.reserved`,
   * `inventory.reservation_rejected` or `inventory.released` (none for a duplicate, stale, deferred
   * or no-op message). Its id is derived from the incoming message id, and its `aggregate.version`
   * is the order version it answers (the order side applies a result only if it is newer).
   */
  private result(e: Envelope, order: OrderEvent, decision: Decision): Envelope | undefined {
    const line = { orderId: order.orderId, sku: order.sku, quantity: order.quantity };
    let type: string;
    let data: ReservedData | ReservationRejectedData | ReleasedData;
    if (decision.kind === 'reserved') {
      type = EVENT_TYPES.reserved;
      data = line;
    } else if (decision.kind === 'rejected') {
      type = EVENT_TYPES.reservationRejected;
      data = { ...line, reason: decision.reason, available: decision.free };
    } else if (decision.kind === 'released') {
      type = EVENT_TYPES.released;
      // what was reserved, on the sku it was reserved on
      data = { ...line, sku: decision.state.sku, quantity: decision.state.quantity };
    } else {
      return undefined;
    }
    return newEnvelope({
      // A redelivery can never create a second event: the id is a function of the message id.
      id: uuidV5(`${e.id}:${type}`),
      type,
      aggregate: { type: 'reservation', id: order.orderId, version: order.version },
      data,
      correlationId: e.correlation_id,
      causationId: e.id,
      producer: PRODUCERS.inventoryService,
      // the order's trace goes on with its answer
      traceId: e.trace_id,
    });
  }

  private settled(d: Decoded, applied: Applied): Outcome {
    if (typeof applied === 'object') {
      return this.failure(d.message, d.envelope, new PermanentMessageError(applied.invalid));
    }
    if (applied === 'deferred') {
      const outcome = this.retry.outcome(d.message, d.envelope.occurred_at, 'deferred');
      this.journal('deferred', d.message, d.envelope, outcome.kind, 'missing predecessor');
      return outcome;
    }
    this.journal(
      applied === 'duplicate' ? 'duplicate' : 'effect-committed',
      d.message,
      d.envelope,
      applied,
    );
    return { kind: 'ack', result: applied };
  }

  private failure(message: InboundMessage, envelope: Envelope | undefined, err: unknown): Outcome {
    return this.retry.outcome(message, envelope?.occurred_at, { error: err });
  }

  private journal(
    step: 'received' | 'duplicate' | 'effect-committed' | 'deferred',
    message: InboundMessage,
    envelope: Envelope | undefined,
    outcome?: string,
    reason?: string,
  ): void {
    this.deps.journal?.record({
      step,
      messageId: message.messageId ?? null,
      eventType: envelope?.type ?? message.type ?? null,
      attempt: message.attempt,
      redelivered: message.redelivered,
      ...(outcome ? { outcome } : {}),
      ...(reason ? { reason } : {}),
    });
  }
}
