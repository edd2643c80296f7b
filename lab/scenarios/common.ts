import type { Configuration } from '../configurations.js';
import type { Measurements } from '../measure.js';
import type { Rig } from '../rigs/index.js';
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

/**
 * One order through the API and the relay, then its event published a second time (same id), as
 * a relay that crashed between confirm and mark would: waits until both copies are acknowledged.
 */
export async function orderDeliveredTwice(
  rig: Rig,
  order: { sku: string; stock: number; quantity: number },
): Promise<void> {
  await rig.database.stock(order.sku, order.stock);
  await rig.startConsumer();
  rig.run.begin();
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
  const { rows } = await rig.db.query<{ available: number; reserved: number }>(
    'SELECT available, reserved FROM stock WHERE sku = $1',
    [sku],
  );
  return rows[0] ?? { available: 0, reserved: 0 };
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
 * True when the consumer's queue holds nothing: nothing ready, in flight or waiting out a retry
 * delay (what the broker says; the journal may not have the last ack yet).
 */
export async function queueIdle(rig: Rig): Promise<boolean> {
  const i = await rig.backend.inspect();
  return i.ready + i.inFlight + i.retrying === 0;
}
