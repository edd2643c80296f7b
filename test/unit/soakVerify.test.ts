import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type { Diagnosis } from '../../shared/index.js';
import { ORDER_RESULTS_CONSUMER } from '../../shared/orders/OrderResults.js';
import type { BadRow } from '../../soak/chaos.js';
import { makePlan, type Plan } from '../../soak/plan.js';
import { readJournals, verify } from '../../soak/verify.js';

/**
 * The soak's end-state checker must not pass vacuously: a consistent end state passes, and each
 * kind of damage (a lost order, a reservation twice, stock off by one, an unpublished row, …) is
 * reported. The database is replaced by canned rows.
 */
interface World {
  /** The order side's inbox claims (consumer `order-results`). */
  resultClaims?: { message_id: string }[];
  orders: { id: string; sku: string; quantity: number; created_event_id: string }[];
  reservations: {
    order_id: string;
    sku: string;
    quantity: number;
    status: string;
    message_id: string;
    reason: string | null;
  }[];
  stock: { sku: string; available: number; reserved: number }[];
  outbox: {
    id: string;
    aggregate_id: string;
    event_type: string;
    unpublished: boolean;
    needs_attention: boolean;
    last_error?: string | null;
  }[];
  inventory: {
    id: string;
    order_id: string;
    event_type: string;
    unpublished: boolean;
    needs_attention: boolean;
  }[];
  claims: { message_id: string; n: number }[];
  parked: Diagnosis[];
  journal: string[];
}

/** The end state a correct pipeline reaches for `plan`, deciding orders in plan order. */
function settle(plan: Plan): World {
  const w: World = {
    orders: [],
    reservations: [],
    stock: [...plan.stock].map(([sku, available]) => ({ sku, available, reserved: 0 })),
    outbox: [],
    inventory: [],
    claims: [],
    parked: [],
    journal: [],
  };
  for (const p of plan.orders) {
    const eventId = randomUUID();
    w.orders.push({ id: p.orderId, sku: p.sku, quantity: p.quantity, created_event_id: eventId });
    w.outbox.push({
      id: eventId,
      aggregate_id: p.orderId,
      event_type: 'order.created',
      unpublished: false,
      needs_attention: false,
    });
    if (p.poison) {
      w.parked.push({
        messageId: eventId,
        type: 'order.created',
        schemaVersion: '1.0',
        attempts: 0,
        firstFailureAt: '2026-11-29T00:00:00Z',
        parkedAt: '2026-11-29T00:00:00Z',
        reason: 'permanent',
        errorClass: 'permanent',
        error: `data: ${p.poison}`,
        correlationId: null,
        traceId: null,
        producer: null,
        origin: { queue: null, exchange: null, routingKey: null },
        consumer: 'inventory',
      });
      continue;
    }
    const s = w.stock.find((x) => x.sku === p.sku);
    const fits = s && s.available - s.reserved >= p.quantity;
    if (s && fits) s.reserved += p.quantity;
    else {
      w.inventory.push({
        id: randomUUID(),
        order_id: p.orderId,
        event_type: 'inventory.reservation_rejected',
        unpublished: false,
        needs_attention: false,
      });
    }
    w.reservations.push({
      order_id: p.orderId,
      sku: p.sku,
      quantity: p.quantity,
      status: fits ? 'reserved' : 'rejected',
      message_id: eventId,
      reason: fits ? null : s ? 'out_of_stock' : 'unknown_sku',
    });
    w.claims.push({ message_id: eventId, n: 1 });
    w.journal.push(
      JSON.stringify({
        message: 'journal',
        journal: { step: 'effect-committed', messageId: eventId },
      }),
    );
  }
  return w;
}

function check(plan: Plan, w: World, badRows: BadRow[] = []) {
  const db = {
    query: async (sql: string, params: unknown[] = []) => {
      // the order side's claims (consumer `order-results`): by default one per inventory result
      if (sql.includes('FROM processed_messages') && params[0] === ORDER_RESULTS_CONSUMER) {
        const rows = w.resultClaims ?? w.inventory.map((e) => ({ message_id: e.id }));
        return { rows, rowCount: rows.length };
      }
      const rows = sql.includes('FROM orders')
        ? w.orders
        : sql.includes('FROM reservations')
          ? w.reservations
          : sql.includes('FROM stock')
            ? w.stock
            : sql.includes('FROM inventory_outbox')
              ? w.inventory
              : sql.includes('FROM outbox')
                ? w.outbox
                : sql.includes('FROM processed_messages')
                  ? w.claims
                  : undefined;
      if (!rows) throw new Error(`unexpected SQL: ${sql}`);
      return { rows, rowCount: rows.length };
    },
  } as unknown as PgDatabase;
  return verify({
    dbs: { orders: db, inventory: db },
    plan,
    parked: w.parked,
    journals: readJournals(w.journal.join('\n')),
    badRows,
  });
}

describe('soak verification', () => {
  const plan = makePlan({ seed: 7, orders: 400, poison: 4 });

  it('a consistent end state passes, with the counts of each outcome', async () => {
    const v = await check(plan, settle(plan));
    expect(v.violations).toEqual([]);
    expect(v.ok).toBe(true);
    expect(v.outcomes.parked).toEqual({ poison: 4, valid: 0 });
    expect(
      v.outcomes.reserved + v.outcomes.rejected.out_of_stock + v.outcomes.rejected.unknown_sku,
    ).toBe(396);
    expect(v.outcomes.rejected.out_of_stock).toBeGreaterThan(0); // scarce and empty SKUs
    expect(v.outcomes.rejected.unknown_sku).toBeGreaterThan(0);
  });

  const firstReserved = (w: World) => w.reservations.find((r) => r.status === 'reserved');
  it.each<[string, (w: World) => void, RegExp]>([
    ['a lost order', (w) => w.orders.pop(), /orders lost/],
    [
      'the order side claimed a message that is no inventory result',
      (w) => {
        w.resultClaims = [{ message_id: randomUUID() }];
      },
      /order-side claims of no inventory result: 1/,
    ],
    [
      'stock reserved twice for one order',
      (w) => {
        const r = firstReserved(w);
        const s = w.stock.find((x) => x.sku === r?.sku);
        if (s) s.reserved += r?.quantity ?? 1;
      },
      /stock arithmetic.*reserved \d+ ≠ Σ reservations/,
    ],
    [
      'units on hand changed',
      (w) => {
        const s = w.stock[0];
        if (s) s.available -= 1;
      },
      /stock arithmetic.*on hand/,
    ],
    [
      'an effect committed twice',
      (w) => w.journal.push(w.journal[0] as string),
      /more than one committed effect/,
    ],
    [
      'a second reservation row',
      (w) => w.reservations.push({ ...(firstReserved(w) as World['reservations'][number]) }),
      /more than one reservation/,
    ],
    [
      'an undecided order',
      (w) => {
        const r = firstReserved(w);
        w.reservations = w.reservations.filter((x) => x !== r);
      },
      /neither reserved, rejected nor parked/,
    ],
    ['a poison event not parked', (w) => w.parked.pop(), /poison events not parked/],
    [
      'an unpublished outbox row',
      (w) => {
        const e = w.outbox[3];
        if (e) e.unpublished = true;
      },
      /outbox not fully published: 1 in outbox/,
    ],
    [
      'a refusal although the order fitted',
      (w) => {
        const r = firstReserved(w);
        const s = w.stock.find((x) => x.sku === r?.sku);
        if (r && s) {
          r.status = 'rejected';
          r.reason = 'out_of_stock';
          s.reserved -= r.quantity;
          w.inventory.push({
            id: randomUUID(),
            order_id: r.order_id,
            event_type: 'inventory.reservation_rejected',
            unpublished: false,
            needs_attention: false,
          });
        }
      },
      /out_of_stock for .* free/,
    ],
    [
      'a rejection without its event',
      (w) => w.inventory.pop(),
      /rejected orders without exactly one rejection event/,
    ],
    ['an inbox claim lost', (w) => w.claims.pop(), /reservations without their inbox claim/],
    [
      'a parked message without a diagnosis',
      (w) => {
        const d = w.parked[0];
        if (d) d.error = '';
      },
      /without a diagnosis/,
    ],
  ])('reports %s', async (_name, damage, violation) => {
    const w = settle(plan);
    damage(w);
    const v = await check(plan, w);
    expect(v.ok).toBe(false);
    expect(v.violations.join('\n')).toMatch(violation);
  });
  it('a valid order parked, or a message parked twice, is a warning, not a violation', async () => {
    const w = settle(plan);
    const r = firstReserved(w) as World['reservations'][number];
    w.reservations = w.reservations.filter((x) => x !== r);
    w.claims = w.claims.filter((c) => c.message_id !== r.message_id);
    const s = w.stock.find((x) => x.sku === r.sku);
    if (s) s.reserved -= r.quantity;
    const poisonParking = w.parked[0] as Diagnosis;
    w.parked.push(
      { ...poisonParking, messageId: r.message_id, error: 'transient: gave up' },
      { ...poisonParking },
    );
    const v = await check(plan, w);
    expect(v.violations).toEqual([]);
    expect(v.outcomes.parked).toEqual({ poison: 4, valid: 1 });
    expect(v.parking).toMatchObject({ messages: 6, distinctIds: 5 });
    expect(v.warnings).toEqual([
      expect.stringMatching(new RegExp(`^valid order ${r.order_id} parked: .*gave up$`)),
      '1 parked copies of an already parked message (a consumer died between parking and acking)',
    ]);
  });
});

describe('soak verification: bad outbox rows (written by the chaos, set aside by the relay)', () => {
  const plan = makePlan({ seed: 7, orders: 100, poison: 2 });
  const withBadRow = (row: Partial<World['outbox'][number]>) => {
    const w = settle(plan);
    const bad: BadRow = {
      id: randomUUID(),
      kind: 'newer-major',
      reason: 'schema_version: major 2',
    };
    w.outbox.unshift({
      id: bad.id,
      aggregate_id: randomUUID(),
      event_type: 'order.created',
      unpublished: true,
      needs_attention: true,
      last_error: 'set aside: invalid envelope: schema_version: major 2 is not supported',
      ...row,
    });
    return { w, bad };
  };

  it('a bad row set aside with its reason passes, and is reported', async () => {
    const { w, bad } = withBadRow({});
    const v = await check(plan, w, [bad]);
    expect(v.violations).toEqual([]);
    expect(v.outbox).toMatchObject({ badRows: 1, setAside: 1, unpublished: 0, needsAttention: 0 });
    expect(v.outbox.setAsideReasons[0]).toMatch(/newer-major: invalid envelope: schema_version/);
  });

  it.each<[string, Partial<World['outbox'][number]>, RegExp]>([
    ['published', { unpublished: false, needs_attention: false }, /not set aside/],
    ['retried for ever', { needs_attention: false, last_error: 'nacked' }, /not set aside/],
    ['set aside for another reason', { last_error: 'set aside: too large' }, /not set aside/],
  ])('reports a bad row %s', async (_name, row, violation) => {
    const { w, bad } = withBadRow(row);
    const v = await check(plan, w, [bad]);
    expect(v.ok).toBe(false);
    expect(v.violations.join('\n')).toMatch(violation);
  });

  it('reports a bad row that reached the consumer, and another row needing attention', async () => {
    const { w, bad } = withBadRow({});
    w.claims.push({ message_id: bad.id, n: 1 });
    const good = w.outbox[5];
    if (good) Object.assign(good, { unpublished: true, needs_attention: true });
    const v = await check(plan, w, [bad]);
    expect(v.violations.join('\n')).toMatch(/bad outbox rows that reached the consumer: 1/);
    expect(v.violations.join('\n')).toMatch(/outbox not fully published: 1 in outbox/);
  });
});
