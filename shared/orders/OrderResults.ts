import {
  decodeMessage,
  type Envelope,
  type InboundMessage,
  Inbox,
  type Journal,
  type Logger,
  type Outcome,
  PermanentMessageError,
  type SqlDatabase,
  type SqlExecutor,
  shortError,
} from '../index.js';
import { EVENT_TYPES } from '../pipeline/constants.js';
import {
  dataSchemaFor,
  type ReservationQuarantinedData,
  type ReservationRejectedData,
  type ReservedData,
} from '../pipeline/events.js';
import type { ReservationStatus } from './OrderService.js';

/** The inbox's consumer name of the order side's results consumer (`processed_messages`). */
export const ORDER_RESULTS_CONSUMER = 'order-results';

/** The result events the order side applies, and the reservation status each one sets. */
const STATUS_OF: Record<string, Exclude<ReservationStatus, 'pending'>> = {
  [EVENT_TYPES.reserved]: 'reserved',
  [EVENT_TYPES.reservationRejected]: 'rejected',
  [EVENT_TYPES.released]: 'released',
  [EVENT_TYPES.reservationQuarantined]: 'quarantined',
};

/**
 * Between results for the same order version: a decision (reserved, rejected, released) outranks
 * a quarantine, so a redriven event's result replaces the quarantine and a late quarantine never
 * replaces a decision; between two quarantines the later park wins.
 */
const rank = (r: { status: string }) => (r.status === 'quarantined' ? 0 : 1);

/** Whether `r` replaces what the order shows (`current`: version, status, parked time). */
function supersedes(
  r: Pick<Result, 'version' | 'status' | 'parkedAt'>,
  current: { version: number; status: string; parkedAt: string | null },
): boolean {
  if (r.version !== current.version) return r.version > current.version;
  if (rank(r) !== rank(current)) return rank(r) > rank(current);
  // same version, both quarantines: the newer park; two decisions: the first one stays
  return (
    r.status === 'quarantined' &&
    current.status === 'quarantined' &&
    Date.parse(r.parkedAt ?? '') > Date.parse(current.parkedAt ?? '')
  );
}
const HANDLED_TYPES = Object.keys(STATUS_OF);

/** The reason a quarantined order shows: why its event was parked, and the error (short). */
function quarantineReason(q: ReservationQuarantinedData): string {
  const text = `${q.reason} (${q.errorClass}): ${q.error || '-'}`;
  return text.length > 300 ? `${text.slice(0, 299)}…` : text;
}

/** What a message came to: `ack` results for the journal. */
export type OrderResultOutcome =
  /** The order's reservation now shows this result. */
  | 'applied'
  /** Already processed (the inbox had it). */
  | 'duplicate'
  /** Older than the result the order already shows (arrived late): acknowledged, no effect. */
  | 'stale'
  /** Cannot be applied (unreadable, unknown schema, unknown order): set aside with its reason. */
  | 'set-aside';

interface Result {
  index: number;
  message: InboundMessage;
  envelope: Envelope;
  orderId: string;
  version: number;
  status: Exclude<ReservationStatus, 'pending'>;
  reason: string | null;
  /** For a quarantine: when inventory parked the order's event. */
  parkedAt: string | null;
}

interface SetAside {
  index: number;
  message: InboundMessage;
  reason: string;
}

/** The text a set-aside body is kept as: UTF-8 when it is text, else `base64:` and the bytes. */
function bodyText(body: Buffer): string {
  const text = body.toString('utf8');
  return Buffer.from(text, 'utf8').equals(body) && !text.includes('\u0000')
    ? text
    : `base64:${body.toString('base64')}`;
}

/**
 * The order side's consumer of inventory's results (`orders.inventory-results` on RabbitMQ,
 * `orders-inventory-results` on SQS): records on each order the reservation status that inventory
 * announced (`inventory.reserved`, `inventory.reservation_rejected`, `inventory.released`), so the
 * order service shows it without reading inventory's tables. Plugged into the consuming port as a
 * `MessageHandler`.
 *
 * Per batch, in one transaction: the inbox claims (consumer `order-results`), the order rows locked
 * in id order, then each order's newest result written. A result applies only if its
 * `aggregate.version` (the order version it answers) is higher than the one the order shows, so a
 * duplicate (inbox) or a late older result (version) changes nothing, whatever the order of
 * arrival. A result that cannot be applied (no message id, an invalid envelope or data, a type or
 * schema major it does not know, an order it does not have) is set aside in
 * `order_results_set_aside` with its reason and body in the same transaction, and acknowledged:
 * never dropped, never retried in a loop.
 *
 * It never returns a retry or a park: its only transient failure is its database, and then it
 * throws and the driver gives the batch back (the RabbitMQ worker reopens its channel with backoff,
 * the SQS record returns after its visibility timeout, the Amazon MQ invocation fails and the
 * broker redelivers). The retry ladder and parking lot of the pipeline belong to `inventory.orders`.
 */
export class OrderResults {
  private readonly inbox: Inbox;
  private readonly readSql: string;
  private readonly writeSql: string;

  constructor(
    private readonly deps: { db: SqlDatabase; logger?: Logger; journal?: Journal },
    options: { consumerName?: string } = {},
  ) {
    this.inbox = new Inbox(options.consumerName ?? ORDER_RESULTS_CONSUMER);
    this.readSql = `WITH claim AS (
         ${this.inbox.claimSql(1)}),
       locked AS (
         SELECT id, reservation_version, reservation_status, reservation_parked_at FROM orders
          WHERE id = ANY (ARRAY(SELECT jsonb_array_elements_text($3::jsonb)::uuid))
          ORDER BY id FOR UPDATE)
       SELECT (SELECT coalesce(json_agg(message_id), '[]') FROM claim) AS claimed,
              (SELECT coalesce(json_agg(locked), '[]') FROM locked) AS orders`;
    this.writeSql = `WITH applied AS (
         UPDATE orders o SET reservation_status = r.status, reservation_reason = r.reason,
                reservation_version = r.version, reservation_event_id = r.event_id,
                reservation_parked_at = r.parked_at, reservation_updated_at = now()
           FROM jsonb_to_recordset($1::jsonb)
                AS r(order_id uuid, status text, reason text, version integer, event_id uuid,
                     parked_at timestamptz)
          -- decided on the locked rows (supersedes); the same version only over a quarantine
          WHERE o.id = r.order_id
            AND (o.reservation_version < r.version
                 OR (o.reservation_version = r.version AND o.reservation_status = 'quarantined'))),
       aside AS (
         INSERT INTO order_results_set_aside (message_id, event_type, reason, body)
         SELECT a.message_id, a.event_type, a.reason, a.body
           FROM jsonb_to_recordset($2::jsonb)
                AS a(message_id text, event_type text, reason text, body text)
         ON CONFLICT (message_id) DO NOTHING)
       SELECT 1`;
  }

  /** One outcome per message (always `ack`), in order. Throws when the database fails. */
  async process(messages: readonly InboundMessage[]): Promise<Outcome[]> {
    const results: Result[] = [];
    const poison: SetAside[] = [];
    messages.forEach((message, index) => {
      this.journal('received', message);
      try {
        results.push({ index, message, ...this.decode(message) });
      } catch (err) {
        poison.push({ index, message, reason: shortError(err) });
      }
    });
    let applied: OrderResultOutcome[];
    try {
      applied = await this.deps.db.transaction((tx) => this.apply(tx, results, poison));
    } catch (err) {
      if (messages.length === 1) throw err;
      // One statement failed for the whole batch (a deadlock with another batch, …): each
      // message on its own, so that one cannot decide the others; a failure then gives back.
      this.deps.logger?.warn('results batch failed; applying its messages one by one', {
        size: messages.length,
        error: shortError(err),
      });
      applied = new Array(messages.length);
      for (const r of results) {
        const one = await this.deps.db.transaction((tx) => this.apply(tx, [r], []));
        applied[r.index] = one[r.index] as OrderResultOutcome;
      }
      for (const p of poison) {
        const one = await this.deps.db.transaction((tx) => this.apply(tx, [], [p]));
        applied[p.index] = one[p.index] as OrderResultOutcome;
      }
    }
    return messages.map((message, i) => {
      const result = applied[i] as OrderResultOutcome;
      this.journal(result === 'duplicate' ? 'duplicate' : 'effect-committed', message, result);
      return { kind: 'ack', result };
    });
  }

  private decode(message: InboundMessage): Omit<Result, 'index' | 'message'> {
    const envelope = decodeMessage(message, {
      consumer: this.inbox.consumer,
      types: HANDLED_TYPES,
      schemaFor: dataSchemaFor,
    });
    const data = envelope.data as
      | ReservedData
      | ReservationRejectedData
      | ReservationQuarantinedData;
    if (envelope.aggregate.id !== data.orderId) {
      throw new PermanentMessageError('aggregate.id differs from data.orderId');
    }
    const status = STATUS_OF[envelope.type] as Result['status'];
    const quarantine = status === 'quarantined' ? (data as ReservationQuarantinedData) : undefined;
    return {
      envelope,
      orderId: data.orderId,
      version: envelope.aggregate.version,
      status,
      reason: quarantine
        ? quarantineReason(quarantine)
        : status === 'rejected'
          ? (data as ReservationRejectedData).reason
          : null,
      parkedAt: quarantine ? new Date(quarantine.parkedAt).toISOString() : null,
    };
  }

  /** Returns the outcome of each message by its index in the batch (a sparse array). */
  private async apply(
    tx: SqlExecutor,
    results: readonly Result[],
    poison: readonly SetAside[],
  ): Promise<OrderResultOutcome[]> {
    const outcomes: OrderResultOutcome[] = [];
    const aside = poison.map((p) => {
      outcomes[p.index] = 'set-aside';
      return {
        message_id: p.message.messageId ?? null,
        event_type: p.message.type ?? null,
        reason: p.reason,
        body: bodyText(p.message.body),
      };
    });
    // Each order's newest claimed result, on the locked rows.
    const newest = new Map<string, Result>();
    if (results.length > 0) {
      const { rows } = await tx.query<{
        claimed: string[];
        orders: {
          id: string;
          reservation_version: number;
          reservation_status: string;
          reservation_parked_at: string | null;
        }[];
      }>(this.readSql, [
        ...this.inbox.claimParams(results.map((r) => r.envelope.id)),
        JSON.stringify([...new Set(results.map((r) => r.orderId))].sort()),
      ]);
      const fresh = new Set(rows[0]?.claimed ?? []);
      const shown = new Map(
        (rows[0]?.orders ?? []).map((o) => [
          o.id,
          {
            version: o.reservation_version,
            status: o.reservation_status,
            parkedAt: o.reservation_parked_at,
          },
        ]),
      );
      for (const r of results) {
        if (!fresh.delete(r.envelope.id)) {
          outcomes[r.index] = 'duplicate'; // processed before, or earlier in this batch
          continue;
        }
        const current = shown.get(r.orderId);
        if (current === undefined) {
          outcomes[r.index] = 'set-aside';
          aside.push({
            message_id: r.envelope.id,
            event_type: r.envelope.type,
            reason: `order ${r.orderId} is not known to the order service`,
            body: bodyText(r.message.body),
          });
          continue;
        }
        const before = newest.get(r.orderId);
        if (!supersedes(r, before ?? current)) {
          outcomes[r.index] = 'stale';
          continue;
        }
        if (before) outcomes[before.index] = 'stale'; // superseded within the batch
        newest.set(r.orderId, r);
        outcomes[r.index] = 'applied';
      }
    }
    if (newest.size > 0 || aside.length > 0) {
      await tx.query(this.writeSql, [
        JSON.stringify(
          [...newest.values()].map((r) => ({
            order_id: r.orderId,
            status: r.status,
            reason: r.reason,
            version: r.version,
            event_id: r.envelope.id,
            parked_at: r.parkedAt,
          })),
        ),
        JSON.stringify(aside),
      ]);
    }
    if (aside.length > 0) {
      this.deps.logger?.warn('inventory results set aside', {
        count: aside.length,
        reasons: [...new Set(aside.map((a) => a.reason))].slice(0, 5),
      });
    }
    return outcomes;
  }

  private journal(
    step: 'received' | 'duplicate' | 'effect-committed',
    message: InboundMessage,
    outcome?: string,
  ): void {
    this.deps.journal?.record({
      step,
      messageId: message.messageId ?? null,
      eventType: message.type ?? null,
      attempt: message.attempt,
      redelivered: message.redelivered,
      ...(outcome ? { outcome } : {}),
    });
  }
}
