import type { Configuration } from '../configurations.js';
import type { Measurements } from '../measure.js';
import type { Rig } from '../rigs/index.js';
import type { ConsumerOptions } from '../rigs/types.js';
import type { NotApplicable } from '../scenario.js';
import { type Check, check } from '../types.js';

/** FIFO is compared only where the scenario is about order. */
export function fifoOnlyForOrder(c: Configuration): NotApplicable | undefined {
  if (!c.fifo) return undefined;
  return {
    reason: 'FIFO queues are compared only where the scenario is about order',
    instead:
      'a FIFO queue settles like sqs-visibility here (no resend mode: no per-message delay), with one message in flight per order',
  };
}

export const ms = (n: number) =>
  n >= 10_000 ? `${(n / 1000).toFixed(0)} s` : `${Math.round(n)} ms`;
export const list = (ns: number[]) => (ns.length ? ns.map(ms).join(', ') : '—');

/** Stock for one SKU, the configuration's consumer started, then the scenario's clock. */
export async function startWithStock(
  rig: Rig,
  sku: string,
  available: number,
  options?: ConsumerOptions,
): Promise<void> {
  await rig.database.stock(sku, available);
  await rig.startConsumer(options);
  rig.run.begin();
}

/**
 * One order through the API and the relay, then its event published a second time (same id), as
 * a relay that crashed between confirm and mark would: waits until both copies are acknowledged.
 */
export async function orderDeliveredTwice(
  rig: Rig,
  order: { sku: string; stock: number; quantity: number },
): Promise<void> {
  await startWithStock(rig, order.sku, order.stock);
  await rig.producer.placeOrder(order.sku, order.quantity);
  const [e] = await rig.producer.outboxEnvelopes();
  if (!e) throw new Error('the order wrote no outbox event');
  await rig.producer.drainOutbox();
  await rig.producer.publish(e);
  rig.run.mark('the same event published again');
  await rig.waitSettled([e.id], 2);
}

/**
 * Checks of our mechanism (inbox rows, rejection events, the parking diagnosis): a peer has none
 * of them, so for a peer only the business checks beside them count.
 */
export function ours(rig: Rig, checks: Check[]): Check[] {
  return rig.configuration.peer ? [] : checks;
}

/** The relay and the broker topology are ours in every peer configuration. */
export const PRODUCER_SIDE_IS_OURS = {
  reason:
    'it exercises the producer side (the outbox and our relay), which is ours in every peer configuration',
  instead: 'the same as in the configuration of the same transport: see its column',
};

export async function stockOf(rig: Rig, sku: string) {
  const { rows } = await rig.inventoryDb.query<{ available: number; reserved: number }>(
    'SELECT available, reserved FROM stock WHERE sku = $1',
    [sku],
  );
  return rows[0] ?? { available: 0, reserved: 0 };
}

/**
 * An order placed (v1, created) and cancelled (v2), its ids in `rig.facts` (`orderId`, `v1`,
 * `v2`): released at version 2, nothing held, v1 applied before v2, whatever the arrival order.
 */
export async function releasedInOrder(rig: Rig, m: Measurements, sku: string): Promise<Check[]> {
  const { rows } = await rig.inventoryDb.query<{ status: string; order_version: number }>(
    'SELECT status, order_version FROM reservations WHERE order_id = $1',
    [String(rig.facts.orderId)],
  );
  const stock = await stockOf(rig, sku);
  const t1 = m.committedAt.get(String(rig.facts.v1));
  const t2 = m.committedAt.get(String(rig.facts.v2));
  return [
    check(
      rows[0]?.status === 'released' && rows[0]?.order_version === 2,
      `released at version 2 (got ${rows[0]?.status} v${rows[0]?.order_version})`,
    ),
    check(stock.reserved === 0, `nothing held (reserved ${stock.reserved})`),
    check(t1 !== undefined && t2 !== undefined && t1 <= t2, 'v1 applied before v2'),
  ];
}

/** From v2's first delivery to its effect (`?` when either is missing). */
export function v2Waited(rig: Rig, m: Measurements): string {
  const v2 = String(rig.facts.v2);
  const first = rig.run.linesOf(v2, 'received')[0]?.at;
  const applied = m.committedAt.get(v2);
  return first !== undefined && applied !== undefined ? ms(applied - first) : '?';
}

/** The checks every scenario makes: no message had two effects; the inbox agrees. */
export function noDoubleEffect(m: Measurements): Check[] {
  return [
    check(
      m.maxEffectsPerMessage <= 1,
      `no event had two effects (most effects for one event: ${m.maxEffectsPerMessage})`,
    ),
  ];
}

export function parkedLine(m: Measurements): string {
  if (m.parked.length === 0) return 'nothing parked';
  const kinds = new Map<string, number>();
  for (const p of m.parked) {
    const k = `${p.reason}/${p.errorClass} via ${p.via}`;
    kinds.set(k, (kinds.get(k) ?? 0) + 1);
  }
  return `parked ${[...kinds].map(([k, n]) => `${n}× ${k}`).join(', ')}`;
}

/** Places `n` orders through the API, `parallel` at a time; returns them in placing order. */
export async function placeOrders(
  rig: Rig,
  n: number,
  order: (i: number) => { sku: string; quantity: number },
  parallel = 10,
): Promise<{ orderId: string; eventId: string }[]> {
  const placed: { orderId: string; eventId: string }[] = [];
  for (let i = 0; i < n; i += parallel) {
    const batch = Array.from({ length: Math.min(parallel, n - i) }, (_, k) => order(i + k));
    placed.push(
      ...(await Promise.all(batch.map((o) => rig.producer.placeOrder(o.sku, o.quantity)))),
    );
  }
  return placed;
}

/**
 * Per SKU: the units reserved and available, and the units of its reserved orders (a peer's: its
 * effect rows, once per event); `agree` checks the reserved totals against the orders.
 */
export async function reservedTotals(rig: Rig) {
  const { rows } = await rig.inventoryDb.query<{
    sku: string;
    reserved: number;
    sum: number;
    available: number;
  }>(
    rig.configuration.peer
      ? `SELECT s.sku, s.reserved, s.available,
                coalesce((SELECT sum(quantity)::int FROM (SELECT DISTINCT ON (event_id) quantity
                           FROM peer_effects e WHERE e.sku = s.sku AND e.outcome = 'reserved') d), 0) AS sum
           FROM stock s ORDER BY s.sku`
      : `SELECT s.sku, s.reserved, s.available,
            coalesce((SELECT sum(quantity)::int FROM reservations r
                       WHERE r.sku = s.sku AND r.status = 'reserved'), 0) AS sum
       FROM stock s ORDER BY s.sku`,
  );
  const agree = check(
    rows.every((r) => r.reserved === r.sum),
    `reserved totals equal the reserved orders (${rows.map((r) => `${r.sku} ${r.reserved}/${r.sum}`).join(', ')})`,
  );
  return { rows, agree };
}

/**
 * True when the consumer's queue holds nothing: nothing ready, in flight or waiting out a retry
 * delay (what the broker says; the journal may not have the last ack yet).
 */
export async function queueIdle(rig: Rig): Promise<boolean> {
  const i = await rig.backend.inspect();
  return i.ready + i.inFlight + i.retrying === 0;
}
