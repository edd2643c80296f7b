import { setTimeout as sleep } from 'node:timers/promises';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { newEnvelope } from '../shared/envelope/envelope.js';
import { OutboxStore } from '../shared/outbox/OutboxStore.js';
import { type Plan, type PlannedOrder, poisonPayload, type Random } from './plan.js';

/** How placing the orders went. */
export interface Placement {
  requests: number;
  retries: number;
  /** 200 answers: an earlier attempt had placed the order, its answer was lost. */
  idempotentRepeats: number;
  refused: { orderId: string; status: number; body: string }[];
}

/** The plan's stock, before any order. */
export async function seedStock(db: PgDatabase, plan: Plan): Promise<void> {
  await db.query(
    `INSERT INTO stock (sku, available)
     SELECT key, value::int FROM jsonb_each_text($1::jsonb)`,
    [JSON.stringify(Object.fromEntries(plan.stock))],
  );
}

/**
 * Places every planned order through the HTTP API at a steady pace (so faults hit a flowing
 * pipeline), retrying with the same orderId after a 5xx or a lost connection, as a client must.
 * Poison events are written straight to the database (the API only accepts good orders).
 */
export async function placeOrders(
  o: { durationMs: number; clients: number },
  plan: Plan,
  db: PgDatabase,
  apiUrl: string,
  r: Random,
  quiet?: QuietSpell,
): Promise<Placement> {
  const result: Placement = { requests: 0, retries: 0, idempotentRepeats: 0, refused: [] };
  const start = Date.now();
  const spacing = (o.durationMs * 0.8) / Math.max(1, plan.orders.length);
  const deadline = start + o.durationMs + 600_000 + (quiet?.ms ?? 0);
  let placedBeforeQuiet = 0;
  // when the quiet spell ends: once every order before it is placed, plus its length
  let spellEnds: (at: number) => void = () => {};
  const spellEnd = new Promise<number>((resolve) => {
    spellEnds = resolve;
  });
  /** When order `i` is due: evenly spaced; those after the quiet spell from its end on. */
  const dueAt = async (i: number) => {
    if (!quiet || i < quiet.fromIndex) return start + i * spacing;
    return Math.max(start + i * spacing, (await spellEnd) + (i - quiet.fromIndex) * spacing);
  };
  let next = 0;
  const poisonStore = new OutboxStore('outbox');
  const placeOne = async (order: PlannedOrder) => {
    if (order.poison) {
      await placePoison(db, poisonStore, order, r, deadline);
      return;
    }
    const body = JSON.stringify({
      sku: order.sku,
      quantity: order.quantity,
      orderId: order.orderId,
    });
    const refuse = (status: number, why: string) => {
      result.refused.push({ orderId: order.orderId, status, body: why });
    };
    for (let attempt = 1; ; attempt++) {
      result.requests++;
      try {
        const res = await fetch(`${apiUrl}/orders`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-correlation-id': `soak-${order.index}`,
          },
          body,
          signal: AbortSignal.timeout(15_000),
        });
        const text = await res.text();
        if (res.status === 201) return;
        if (res.status === 200) {
          result.idempotentRepeats++;
          return;
        }
        if (res.status < 500) return refuse(res.status, text.slice(0, 300));
      } catch {
        // connection refused or reset (the API restarting), or a timeout: same order again
      }
      if (Date.now() > deadline) return refuse(0, 'gave up: API unreachable');
      result.retries++;
      await sleep(Math.min(2_000, 100 * attempt));
    }
  };
  const worker = async () => {
    for (;;) {
      const i = next++;
      const order = plan.orders[i];
      if (!order) return;
      const wait = (await dueAt(i)) - Date.now();
      if (wait > 0) await sleep(wait);
      await placeOne(order);
      if (quiet && i < quiet.fromIndex) placedBeforeQuiet++;
    }
  };
  // the quiet spell: once every order before it is placed, nothing is sent for `ms`; `during`
  // runs a third of the way into it
  const spell = (async () => {
    if (!quiet) return;
    while (placedBeforeQuiet < Math.min(quiet.fromIndex, plan.orders.length)) await sleep(50);
    const begins = Math.max(Date.now(), start + quiet.fromIndex * spacing);
    spellEnds(begins + quiet.ms);
    await sleep(Math.max(0, begins + quiet.ms / 3 - Date.now()));
    await quiet.during();
  })();
  await Promise.all([...Array.from({ length: o.clients }, worker), spell]);
  return result;
}

/**
 * A quiet spell at the API: once every order before `fromIndex` is placed, none is sent for `ms`
 * (the later ones keep their spacing from its end); `during` runs inside it.
 */
export interface QuietSpell {
  fromIndex: number;
  ms: number;
  during: () => Promise<void>;
}

/** An order row and an `order.created` event whose data the consumer must refuse. */
async function placePoison(
  db: PgDatabase,
  store: OutboxStore,
  order: PlannedOrder,
  r: Random,
  deadline: number,
): Promise<void> {
  const envelope = newEnvelope({
    type: 'order.created',
    aggregate: { type: 'order', id: order.orderId, version: 1 },
    data: poisonPayload(order, r),
    correlationId: `soak-poison-${order.index}`,
    producer: 'soak',
  });
  for (;;) {
    try {
      await db.transaction(async (tx) => {
        await tx.query(
          `INSERT INTO orders (id, sku, quantity, created_event_id, correlation_id)
           VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
          [order.orderId, order.sku, order.quantity, envelope.id, envelope.correlation_id],
        );
        await store.append(tx, envelope);
      });
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(200);
    }
  }
}
