import type { Journal, JournalStep } from '../shared/consumer/journal.js';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { decodeEnvelope } from '../shared/envelope/envelope.js';
import type { TxClient } from './types.js';

/**
 * The effect every peer's handler commits, written as a user of that peer would write it: reserve
 * the stock and append the reservation in one PostgreSQL transaction. It is deliberately not
 * idempotent by itself (no inbox, no unique key on the event): whatever deduplication happens is
 * the peer's, so a duplicate the peer lets through shows as a second `peer_effects` row and as
 * stock reserved twice.
 */
export async function ensurePeerSchema(db: PgDatabase): Promise<void> {
  await db.query(`
    CREATE TABLE IF NOT EXISTS peer_effects (
      id           bigserial   PRIMARY KEY,
      event_id     uuid        NOT NULL,
      order_id     uuid,
      sku          text        NOT NULL,
      quantity     integer     NOT NULL,
      outcome      text        NOT NULL CHECK (outcome IN ('reserved', 'rejected')),
      peer         text        NOT NULL,
      committed_at timestamptz NOT NULL DEFAULT clock_timestamp()
    )`);
  await db.query('CREATE INDEX IF NOT EXISTS peer_effects_event_idx ON peer_effects (event_id)');
}

export interface OrderCreated {
  id: string;
  type: string;
  data: { orderId?: string; sku: string; quantity: number };
}

/**
 * Parses a message body as `order.created` the way a careful user of any peer would: against the
 * published envelope contract (the same parser as ours, contracts/), then the type and the data
 * this handler needs. Throws an error naming the bad field.
 */
export function parseOrderCreated(body: string): OrderCreated {
  const envelope = decodeEnvelope(body);
  if (envelope.type !== 'order.created')
    throw new Error(`type: expected order.created, got ${envelope.type}`);
  const d = envelope.data as Partial<OrderCreated['data']>;
  if (typeof d.sku !== 'string') throw new Error('data.sku: missing');
  if (!Number.isInteger(d.quantity) || (d.quantity as number) <= 0)
    throw new Error('data.quantity: not a positive integer');
  return envelope as unknown as OrderCreated;
}

/**
 * Reserves `quantity` of `sku` for the event in one transaction: the stock row is updated when
 * enough is available (else the order is recorded as rejected) and the reservation appended.
 */
export async function reserveEffect(
  db: PgDatabase,
  peer: string,
  event: OrderCreated,
): Promise<'reserved' | 'rejected'> {
  return db.transaction((tx) => reserveEffectIn(tx, peer, event));
}

/**
 * The same two statements inside a transaction the caller already opened (`client`): for peers
 * whose library hands the handler its own transaction (the effect then commits with the library's
 * bookkeeping, e.g. pg-transactional-outbox marking the inbox row processed).
 */
export async function reserveEffectIn(
  client: TxClient,
  peer: string,
  event: OrderCreated,
): Promise<'reserved' | 'rejected'> {
  const { rows } = (await client.query(
    `UPDATE stock SET reserved = reserved + $2, updated_at = now()
      WHERE sku = $1 AND available - reserved >= $2 RETURNING sku`,
    [event.data.sku, event.data.quantity],
  )) as { rows: unknown[] };
  const outcome = rows.length > 0 ? 'reserved' : 'rejected';
  await client.query(
    `INSERT INTO peer_effects (event_id, order_id, sku, quantity, outcome, peer)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [event.id, event.data.orderId ?? null, event.data.sku, event.data.quantity, outcome, peer],
  );
  return outcome;
}

/** Effects committed: all rows, distinct events, events applied more than once. */
export async function effectCounts(
  db: PgDatabase,
): Promise<{ effects: number; distinct: number; appliedTwice: number }> {
  const { rows } = await db.query<{ effects: number; distinct: number; twice: number }>(
    `SELECT count(*)::int AS effects, count(DISTINCT event_id)::int AS distinct,
            (SELECT count(*)::int FROM (SELECT event_id FROM peer_effects GROUP BY event_id
              HAVING count(*) > 1) t) AS twice
       FROM peer_effects`,
  );
  const r = rows[0];
  return { effects: r?.effects ?? 0, distinct: r?.distinct ?? 0, appliedTwice: r?.twice ?? 0 };
}

/**
 * The id a peer's journal lines carry, so they read like ours: the event id in the body when it
 * is JSON with an `id`, else the id the transport carried (SQS `event_id` attribute, AMQP
 * `message_id`), else the broker's own message id.
 */
export function eventIdOf(body: string | undefined, ...fallbacks: (string | undefined)[]): string {
  if (body) {
    try {
      const id = (JSON.parse(body) as { id?: unknown }).id;
      if (typeof id === 'string' && id) return id;
    } catch {
      // not JSON: fall back
    }
  }
  return fallbacks.find((f) => f) ?? 'unknown';
}

/** A peer's journal line about an `order.created` event, as ours reads: its step and attempt. */
export function journalStep(
  journal: Journal | undefined,
  step: JournalStep,
  messageId: string,
  attempt: number,
): void {
  journal?.record({
    step,
    messageId,
    eventType: 'order.created',
    attempt,
    redelivered: attempt > 1,
  });
}
