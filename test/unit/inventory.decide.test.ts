import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type DecisionInput,
  decide,
  decideBatch,
  type LockedBatch,
  type OrderEvent,
  type ReservationState,
} from '../../shared/inventory/decide.js';
import type { StockLevel } from '../../shared/inventory/stock.js';

const ORDER = '6f1c1f2e-0000-4000-8000-000000000001';
const OTHER = '6f1c1f2e-0000-4000-8000-000000000002';

const created = (patch: Partial<OrderEvent> = {}): OrderEvent => ({
  messageId: randomUUID(),
  type: 'order.created',
  version: 1,
  orderId: ORDER,
  sku: 'SKU-A',
  quantity: 2,
  ...patch,
});
const cancelled = (patch: Partial<OrderEvent> = {}): OrderEvent =>
  created({ type: 'order.cancelled', version: 2, ...patch });

const reservation = (patch: Partial<ReservationState> = {}): ReservationState => ({
  status: 'reserved',
  order_version: 1,
  quantity: 2,
  sku: 'SKU-A',
  message_id: randomUUID(),
  reason: null,
  ...patch,
});
const stockOf = (...rows: StockLevel[]) => new Map(rows.map((r) => [r.sku, r]));
const input = (patch: Partial<DecisionInput> = {}): DecisionInput => ({
  fresh: true,
  state: undefined,
  stock: stockOf({ sku: 'SKU-A', available: 10, reserved: 0 }),
  ...patch,
});

describe('decide: one message', () => {
  it('reserves an order within the free units (up to the last one)', () => {
    const e = created({ quantity: 4 });
    const stock = stockOf({ sku: 'SKU-A', available: 10, reserved: 6 });
    expect(decide(e, input({ stock }))).toEqual({
      kind: 'reserved',
      state: {
        status: 'reserved',
        order_version: 1,
        quantity: 4,
        sku: 'SKU-A',
        message_id: e.messageId,
        reason: null,
      },
      stock: { sku: 'SKU-A', reserved: 4 },
    });
  });

  it('rejects an order beyond the free units, saying how many were free', () => {
    const e = created({ quantity: 5 });
    const stock = stockOf({ sku: 'SKU-A', available: 10, reserved: 6 });
    expect(decide(e, input({ stock }))).toEqual({
      kind: 'rejected',
      reason: 'out_of_stock',
      free: 4,
      state: {
        status: 'rejected',
        order_version: 1,
        quantity: 5,
        sku: 'SKU-A',
        message_id: e.messageId,
        reason: 'out_of_stock',
      },
    });
  });

  it('rejects an order for an unknown sku, with no free units', () => {
    const e = created({ sku: 'SKU-NONE' });
    expect(decide(e, input())).toMatchObject({
      kind: 'rejected',
      reason: 'unknown_sku',
      free: 0,
      state: { status: 'rejected', sku: 'SKU-NONE', reason: 'unknown_sku' },
    });
  });

  it('releases a reservation, on the sku and quantity it was reserved with', () => {
    const state = reservation({ quantity: 3 });
    const e = cancelled({ sku: 'SKU-A', quantity: 3 });
    expect(decide(e, input({ state }))).toEqual({
      kind: 'released',
      state: { ...state, status: 'released', order_version: 2, message_id: e.messageId },
      stock: { sku: 'SKU-A', reserved: -3 },
    });
  });

  it('releases without a stock change when the stock row is not there', () => {
    const state = reservation({ sku: 'SKU-GONE' });
    expect(decide(cancelled({ sku: 'SKU-GONE' }), input({ state }))).toMatchObject({
      kind: 'released',
      stock: undefined,
    });
  });

  it('refuses a cancel that names another sku than the reservation, with a diagnosis', () => {
    const state = reservation({ sku: 'SKU-A', quantity: 3 });
    const e = cancelled({ sku: 'SKU-B', quantity: 3 });
    expect(decide(e, input({ state }))).toEqual({
      kind: 'invalid',
      error: `order.cancelled names sku SKU-B but order ${e.orderId} was recorded with sku SKU-A (reserved)`,
    });
  });

  it('a cancel of a rejected order is a noop that still moves its version', () => {
    const state = reservation({ status: 'rejected', reason: 'out_of_stock' });
    const e = cancelled();
    expect(decide(e, input({ state }))).toEqual({
      kind: 'noop',
      state: { ...state, order_version: 2, message_id: e.messageId },
    });
  });

  it('a cancel of an order never seen (its first event) is a noop recorded as released', () => {
    const e = cancelled({ version: 1, sku: 'SKU-B', quantity: 7 });
    expect(decide(e, input())).toEqual({
      kind: 'noop',
      state: {
        status: 'released',
        order_version: 1,
        quantity: 7,
        sku: 'SKU-B',
        message_id: e.messageId,
        reason: null,
      },
    });
  });

  it('a message the inbox did not claim now is a duplicate, whatever else holds', () => {
    expect(decide(created(), input({ fresh: false }))).toEqual({ kind: 'duplicate' });
    expect(decide(created({ version: 9 }), input({ fresh: false }))).toEqual({
      kind: 'duplicate',
    });
  });

  it('defers a message whose predecessor is missing (version ahead of last + 1)', () => {
    expect(decide(cancelled({ version: 2 }), input())).toEqual({ kind: 'deferred' });
    const state = reservation({ order_version: 1 });
    expect(decide(cancelled({ version: 3 }), input({ state }))).toEqual({ kind: 'deferred' });
  });

  it('acknowledges a superseded message as stale (version ≤ last)', () => {
    const state = reservation({ status: 'released', order_version: 2 });
    expect(decide(created({ version: 1 }), input({ state }))).toEqual({ kind: 'stale' });
    expect(decide(cancelled({ version: 2 }), input({ state }))).toEqual({ kind: 'stale' });
  });
});

const locked = (patch: Partial<LockedBatch> & { events: OrderEvent[] }): LockedBatch => ({
  claimed: patch.claimed ?? patch.events.map((e) => e.messageId),
  states: patch.states ?? new Map(),
  stock: patch.stock ?? [{ sku: 'SKU-A', available: 10, reserved: 0 }],
});

describe('decideBatch: messages of one batch, each on the state the earlier ones left', () => {
  it('two events of one order: created then cancelled → reserved then released', () => {
    const events = [created({ quantity: 3 }), cancelled({ quantity: 3 })];
    const r = decideBatch(events, locked({ events }));
    expect(r.decisions.map((d) => d.kind)).toEqual(['reserved', 'released']);
    expect(r.states).toEqual(
      new Map([[ORDER, expect.objectContaining({ status: 'released', order_version: 2 })]]),
    );
    expect(r.stock).toEqual([]); // back where it was: nothing to write
    expect(r.deferred).toEqual([]);
  });

  it('the cancel ahead of its create in one batch is deferred, the create applies', () => {
    const events = [cancelled(), created()];
    const r = decideBatch(events, locked({ events }));
    expect(r.decisions.map((d) => d.kind)).toEqual(['deferred', 'reserved']);
    expect(r.deferred).toEqual([events[0]?.messageId]);
    expect(r.stock).toEqual([{ sku: 'SKU-A', reserved: 2 }]);
  });

  it('two orders competing for the last units of a sku: the first wins, the second is told', () => {
    const events = [
      created({ orderId: ORDER, quantity: 2 }),
      created({ orderId: OTHER, quantity: 2 }),
    ];
    const stock = [{ sku: 'SKU-A', available: 5, reserved: 2 }];
    const r = decideBatch(events, locked({ events, stock }));
    expect(r.decisions[0]).toMatchObject({ kind: 'reserved' });
    expect(r.decisions[1]).toMatchObject({ kind: 'rejected', reason: 'out_of_stock', free: 1 });
    expect(r.stock).toEqual([{ sku: 'SKU-A', reserved: 4 }]);
    expect([...r.states.keys()]).toEqual([ORDER, OTHER]);
  });

  it('a release frees units for a later order of the same batch', () => {
    const events = [cancelled({ orderId: OTHER }), created({ orderId: ORDER, quantity: 4 })];
    const r = decideBatch(
      events,
      locked({
        events,
        states: new Map([[OTHER, reservation({ quantity: 3 })]]),
        stock: [{ sku: 'SKU-A', available: 4, reserved: 3 }],
      }),
    );
    expect(r.decisions.map((d) => d.kind)).toEqual(['released', 'reserved']);
    expect(r.stock).toEqual([{ sku: 'SKU-A', reserved: 4 }]);
  });

  it('a message twice in one batch: the second is a duplicate', () => {
    const e = created();
    const r = decideBatch([e, e], locked({ events: [e] }));
    expect(r.decisions.map((d) => d.kind)).toEqual(['reserved', 'duplicate']);
    expect(r.stock).toEqual([{ sku: 'SKU-A', reserved: 2 }]);
  });

  it('a message already in the inbox is a duplicate, and writes nothing', () => {
    const e = created();
    const r = decideBatch([e], locked({ events: [e], claimed: [] }));
    expect(r.decisions).toEqual([{ kind: 'duplicate' }]);
    expect(r).toMatchObject({ deferred: [], stock: [], states: new Map() });
  });

  it('leaves the locked rows it was given untouched', () => {
    const events = [created(), cancelled()];
    const stock = [{ sku: 'SKU-A', available: 10, reserved: 1 }];
    const states = new Map<string, ReservationState>();
    decideBatch(events, locked({ events, stock, states }));
    expect(stock).toEqual([{ sku: 'SKU-A', available: 10, reserved: 1 }]);
    expect(states.size).toBe(0);
  });
});

describe('decideBatch over random batches', () => {
  const SKUS = ['SKU-A', 'SKU-B', 'SKU-NONE']; // SKU-NONE has no stock row
  /** Orders as the order service emits them: created at version 1, maybe cancelled at 2. */
  const arbOrders = fc.array(
    fc.record({
      sku: fc.constantFrom(...SKUS),
      quantity: fc.integer({ min: 1, max: 6 }),
      cancelled: fc.boolean(),
    }),
    { minLength: 1, maxLength: 6 },
  );
  const toEvents = (orders: { sku: string; quantity: number; cancelled: boolean }[]) =>
    orders.flatMap(({ sku, quantity, cancelled: isCancelled }, i) => {
      const line = {
        orderId: `6f1c1f2e-0000-4000-8000-${String(i).padStart(12, '0')}`,
        sku,
        quantity,
      };
      const c = created({ ...line, messageId: randomUUID() });
      return isCancelled ? [c, cancelled({ ...line, messageId: randomUUID() })] : [c];
    });

  it('never reserves more than is available, and reserved is what reserved orders hold', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10 }),
        fc.integer({ min: 0, max: 10 }),
        arbOrders,
        // Deliveries: batches of message indices, in any order, with redeliveries and losses.
        fc.array(fc.array(fc.nat(), { maxLength: 8 }), { maxLength: 8 }),
        (a, b, orders, deliveries) => {
          const events = toEvents(orders);
          // The "database" between batches: what each batch wrote.
          const stock = new Map<string, StockLevel>([
            ['SKU-A', { sku: 'SKU-A', available: a, reserved: 0 }],
            ['SKU-B', { sku: 'SKU-B', available: b, reserved: 0 }],
          ]);
          const states = new Map<string, ReservationState>();
          const inbox = new Set<string>();
          for (const indices of deliveries) {
            const batch = indices.map((i) => events[i % events.length] as OrderEvent);
            const claimed = batch.map((e) => e.messageId).filter((id) => !inbox.has(id));
            const r = decideBatch(batch, { claimed, states, stock: [...stock.values()] });
            for (const id of claimed) if (!r.deferred.includes(id)) inbox.add(id);
            for (const s of r.stock) (stock.get(s.sku) as StockLevel).reserved = s.reserved;
            for (const [id, st] of r.states) states.set(id, st);
            for (const s of stock.values()) {
              expect(s.reserved).toBeGreaterThanOrEqual(0);
              expect(s.reserved).toBeLessThanOrEqual(s.available);
              const held = [...states.values()]
                .filter((st) => st.status === 'reserved' && st.sku === s.sku)
                .reduce((n, st) => n + st.quantity, 0);
              expect(s.reserved).toBe(held);
            }
          }
        },
      ),
      { seed: 20_260_301, numRuns: 300 },
    );
  });
});
