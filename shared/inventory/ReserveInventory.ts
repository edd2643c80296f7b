import { decideRetry, type RetryBudget } from '../config/budget.js';
import { EVENT_TYPES, PRODUCERS } from '../config/constants.js';
import {
  classifyError,
  isInfrastructureError,
  PermanentMessageError,
  shortError,
} from '../consumer/classify.js';
import type { Journal } from '../consumer/journal.js';
import type { AckResult, InboundMessage, Outcome } from '../consumer/types.js';
import type { SqlDatabase, SqlExecutor } from '../db/types.js';
import { decodeEnvelope, type Envelope, newEnvelope, schemaMajor } from '../envelope/envelope.js';
import {
  dataSchemaFor,
  type OrderCreatedData,
  type ReservationRejectedData,
} from '../envelope/events.js';
import { fault } from '../faults.js';
import type { Logger } from '../logger.js';
import { OutboxStore } from '../outbox/OutboxStore.js';
import { uuidV5 } from '../util/uuid.js';

/** The inbox's consumer name for this use case (`processed_messages.consumer_name`). */
export const INVENTORY_CONSUMER = 'inventory';

export interface ReserveInventoryOptions {
  budget: RetryBudget;
  consumerName?: string;
  /** Clock, for age decisions (tests). */
  now?: () => number;
}

type Applied = AckResult | 'deferred';

interface Decoded {
  index: number;
  message: InboundMessage;
  envelope: Envelope;
}

/**
 * Reserves stock for `order.created` and releases it for `order.cancelled`, exactly once per event,
 * whatever the transport redelivers.
 *
 * For each valid message, in one transaction: the inbox claim (`processed_messages`, unique per
 * consumer and message id), the ordering check on `aggregate.version` (DESIGN §7), the guarded
 * stock update and the reservation row, and for a refused order an `inventory.reservation_rejected`
 * event in `inventory_outbox` whose id is derived from the incoming message id.
 *
 * Several messages share one transaction (one COMMIT for the batch): each message's effect is
 * still decided on its own, and if the shared transaction fails, every message is processed
 * again on its own so that one bad message cannot decide the outcome of the others.
 */
export class ReserveInventory {
  private readonly outbox = new OutboxStore('inventory_outbox');
  private readonly consumer: string;
  private readonly now: () => number;

  constructor(
    private readonly deps: { db: SqlDatabase; logger?: Logger; journal?: Journal },
    private readonly options: ReserveInventoryOptions,
  ) {
    this.consumer = options.consumerName ?? INVENTORY_CONSUMER;
    this.now = options.now ?? Date.now;
  }

  /** Returns one outcome per message, in order. Throws only for an injected fault. */
  async process(messages: readonly InboundMessage[]): Promise<Outcome[]> {
    const outcomes: (Outcome | undefined)[] = new Array(messages.length);
    const valid: Decoded[] = [];
    messages.forEach((message, index) => {
      this.journal('received', message, undefined);
      try {
        valid.push({ index, message, envelope: this.decode(message) });
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
        for (const d of valid) {
          let one: Applied[];
          try {
            one = await this.deps.db.transaction((tx) => this.applyAll(tx, [d]));
          } catch (err) {
            outcomes[d.index] = this.failure(d.message, d.envelope, err);
            continue;
          }
          outcomes[d.index] = this.settled(d, one[0] as Applied);
          fault('reserve.after-commit');
        }
      }
    }
    return outcomes as Outcome[];
  }

  private decode(message: InboundMessage): Envelope {
    if (!message.messageId) throw new PermanentMessageError('message has no message id');
    const envelope = decodeEnvelope(message.body);
    if (envelope.id !== message.messageId) {
      throw new PermanentMessageError(
        `message id ${message.messageId} differs from envelope id ${envelope.id}`,
      );
    }
    const schema = dataSchemaFor(envelope.type, schemaMajor(envelope.schema_version));
    if (
      envelope.type !== EVENT_TYPES.orderCreated &&
      envelope.type !== EVENT_TYPES.orderCancelled
    ) {
      throw new PermanentMessageError(
        `event type ${envelope.type} is not handled by ${this.consumer}`,
      );
    }
    const data = schema?.safeParse(envelope.data);
    if (!data?.success) {
      const issue = data?.error.issues[0];
      throw new PermanentMessageError(
        `data.${issue?.path.join('.')}: ${issue?.message ?? 'invalid'}`,
      );
    }
    if (envelope.aggregate.id !== (envelope.data as OrderCreatedData).orderId) {
      throw new PermanentMessageError('aggregate.id differs from data.orderId');
    }
    return envelope;
  }

  private async applyAll(tx: SqlExecutor, batch: readonly Decoded[]): Promise<Applied[]> {
    // Lock the stock rows this batch touches in a fixed order, so that two consumers' batches
    // never wait on each other's rows in opposite orders (no deadlock between batches).
    const skus = [...new Set(batch.map((d) => (d.envelope.data as OrderCreatedData).sku))].sort();
    await tx.query(
      `SELECT sku FROM stock WHERE sku IN (SELECT jsonb_array_elements_text($1::jsonb))
        ORDER BY sku FOR UPDATE`,
      [JSON.stringify(skus)],
    );
    const results: Applied[] = [];
    for (const d of batch) results.push(await this.applyOne(tx, d.envelope));
    return results;
  }

  private async applyOne(tx: SqlExecutor, e: Envelope): Promise<Applied> {
    const claim = await tx.query(
      `INSERT INTO processed_messages (consumer_name, message_id) VALUES ($1, $2)
       ON CONFLICT DO NOTHING RETURNING message_id`,
      [this.consumer, e.id],
    );
    if (claim.rowCount === 0) return 'duplicate';

    const data = e.data as OrderCreatedData;
    const { rows } = await tx.query<{
      status: string;
      order_version: number;
      quantity: number;
      sku: string;
    }>(
      'SELECT status, order_version, quantity, sku FROM reservations WHERE order_id = $1 FOR UPDATE',
      [data.orderId],
    );
    const state = rows[0];
    const last = state?.order_version ?? 0;
    const version = e.aggregate.version;
    if (version > last + 1) {
      // A predecessor has not been applied yet: undo the claim, try again later (deferral).
      await tx.query(
        'DELETE FROM processed_messages WHERE consumer_name = $1 AND message_id = $2',
        [this.consumer, e.id],
      );
      return 'deferred';
    }
    if (version <= last) return 'stale';

    if (e.type === EVENT_TYPES.orderCreated) return this.reserve(tx, e, data);
    return this.release(tx, e, state);
  }

  private async reserve(tx: SqlExecutor, e: Envelope, data: OrderCreatedData): Promise<Applied> {
    const reserved = await tx.query(
      `WITH taken AS (
         UPDATE stock SET reserved = reserved + $3, updated_at = now()
          WHERE sku = $2 AND available - reserved >= $3
          RETURNING sku)
       INSERT INTO reservations (order_id, sku, quantity, status, message_id, order_version)
       SELECT $1, $2, $3, 'reserved', $4, $5 FROM taken
       RETURNING order_id`,
      [data.orderId, data.sku, data.quantity, e.id, e.aggregate.version],
    );
    if (reserved.rowCount === 1) return 'reserved';

    // A business result, not an error: record it and tell the order service.
    const { rows } = await tx.query<{ free: number }>(
      'SELECT available - reserved AS free FROM stock WHERE sku = $1',
      [data.sku],
    );
    const free = rows[0]?.free;
    const reason: ReservationRejectedData['reason'] =
      free === undefined ? 'unknown_sku' : 'out_of_stock';
    await tx.query(
      `INSERT INTO reservations (order_id, sku, quantity, status, message_id, order_version, reason)
       VALUES ($1, $2, $3, 'rejected', $4, $5, $6)`,
      [data.orderId, data.sku, data.quantity, e.id, e.aggregate.version, reason],
    );
    const rejected: ReservationRejectedData = {
      orderId: data.orderId,
      sku: data.sku,
      quantity: data.quantity,
      reason,
      available: free ?? 0,
    };
    await this.outbox.append(
      tx,
      newEnvelope({
        // Derived from the incoming message id: a redelivery can never create a second event.
        id: uuidV5(`${e.id}:${EVENT_TYPES.reservationRejected}`),
        type: EVENT_TYPES.reservationRejected,
        aggregate: { type: 'reservation', id: data.orderId, version: e.aggregate.version },
        data: rejected,
        correlationId: e.correlation_id,
        causationId: e.id,
        producer: PRODUCERS.inventoryService,
      }),
    );
    return 'rejected';
  }

  private async release(
    tx: SqlExecutor,
    e: Envelope,
    state: { status: string; quantity: number; sku: string } | undefined,
  ): Promise<Applied> {
    if (state?.status === 'reserved') {
      await tx.query(
        'UPDATE stock SET reserved = reserved - $2, updated_at = now() WHERE sku = $1',
        [state.sku, state.quantity],
      );
    }
    await tx.query(
      `UPDATE reservations
          SET status = CASE WHEN status = 'reserved' THEN 'released' ELSE status END,
              order_version = $2, message_id = $3, updated_at = now()
        WHERE order_id = $1`,
      [e.aggregate.id, e.aggregate.version, e.id],
    );
    return state?.status === 'reserved' ? 'released' : 'noop';
  }

  private settled(d: Decoded, applied: Applied): Outcome {
    if (applied === 'deferred') {
      const outcome = this.retryOrPark(
        d.message,
        d.envelope,
        'deferred',
        'predecessor not applied yet',
        false,
      );
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
    const errorClass = classifyError(err);
    const error = shortError(err);
    if (errorClass === 'permanent') return { kind: 'park', reason: 'permanent', errorClass, error };
    return this.retryOrPark(message, envelope, errorClass, error, isInfrastructureError(err));
  }

  private retryOrPark(
    message: InboundMessage,
    envelope: Envelope | undefined,
    errorClass: 'transient' | 'unknown' | 'deferred',
    error: string,
    infrastructure: boolean,
  ): Outcome {
    const occurred = envelope ? Date.parse(envelope.occurred_at) : this.now();
    const decision = decideRetry(this.options.budget, message.attempt, this.now() - occurred, {
      deferral: errorClass === 'deferred',
    });
    if (decision.retry) {
      return {
        kind: 'retry',
        delayMs: decision.delayMs,
        attempt: decision.attempt,
        errorClass,
        error,
        infrastructure,
      };
    }
    const reason = errorClass === 'deferred' ? 'missing_predecessor' : decision.reason;
    return { kind: 'park', reason, errorClass, error };
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
