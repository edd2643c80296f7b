import type { Scenario } from '../scenario.js';
import { check } from '../types.js';
import {
  ms,
  noDoubleEffect,
  orderDeliveredTwice,
  ours,
  placeOrders,
  reservedTotals,
  startWithStock,
  stockOf,
} from './common.js';

/** Orders placed through the HTTP API, published by the relay, consumed: nothing goes wrong. */
export const happyPath: Scenario = {
  id: 'happy-path',
  title: 'Happy path',
  stimulus:
    'Three orders through POST /orders; the relay publishes them; the consumer reserves stock.',
  invariant: 'Each order reserved exactly once; nothing retried, nothing parked; the outbox empty.',
  async run(rig) {
    await startWithStock(rig, 'SKU-H', 100);
    const placed = [];
    for (const q of [1, 2, 3]) placed.push(await rig.producer.placeOrder('SKU-H', q));
    await rig.producer.drainOutbox();
    await rig.waitSettled(placed.map((p) => p.eventId));
  },
  async check(rig, m) {
    const stock = await stockOf(rig, 'SKU-H');
    return [
      check(m.effectsByStatus.reserved === 3, `3 reservations (got ${m.effects})`),
      check(stock.reserved === 6, `6 units reserved (got ${stock.reserved})`),
      check(m.retries === 0, `no retry (got ${m.retries})`),
      check(m.parked.length === 0, `nothing parked (got ${m.parked.length})`),
      check(m.outboxUnpublished === 0, 'outbox drained'),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) =>
    `${m.deliveries} deliveries → ${m.effects} reservations; ack = ${rig.configuration.ack}`,
};

/** The same event published twice (a relay retry, a network blip): the inbox absorbs it. */
export const duplicatePublish: Scenario = {
  id: 'duplicate-publish',
  title: 'Duplicate publish',
  stimulus:
    'One order; the relay publishes it, then the same event (same id) is published a second time.',
  invariant: 'One reservation; the second copy is recognised by the inbox and changes nothing.',
  async run(rig) {
    await orderDeliveredTwice(rig, { sku: 'SKU-D', stock: 10, quantity: 2 });
  },
  async check(rig, m) {
    const stock = await stockOf(rig, 'SKU-D');
    return [
      check(m.effects === 1, `one reservation (got ${m.effects})`),
      check(stock.reserved === 2, `2 units reserved (got ${stock.reserved})`),
      ...ours(rig, [
        check(
          m.duplicatesAbsorbed + m.droppedCopies >= 1,
          `the copy absorbed (${m.duplicatesAbsorbed} by the inbox, ${m.droppedCopies} dropped by the broker's deduplication)`,
        ),
        check(m.inboxRows === 1, `one inbox row (got ${m.inboxRows})`),
      ]),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) =>
    rig.configuration.peer
      ? `${m.deliveries} deliveries of one id → ${m.effects} effect(s); ${m.duplicatesAbsorbed} recognised as a duplicate by the peer`
      : m.droppedCopies > 0
        ? `the broker dropped the second publish (same id within its deduplication window): ${m.deliveries} delivery → ${m.effects} effect; the inbox had nothing to absorb`
        : `${m.deliveries} deliveries of one id → ${m.effects} effect; the inbox claim (same COMMIT as the effect) absorbed ${m.duplicatesAbsorbed}`,
};

/** The consumer dies after COMMIT, before the ack / delete. */
export const crashAfterCommit: Scenario = {
  id: 'crash-after-commit',
  title: 'Crash after COMMIT, before ack/delete',
  stimulus:
    'Fault reserve.after-commit (once): the effect is committed, then the consumer fails before acknowledging.',
  invariant: 'The message comes back and is recognised as a duplicate: one reservation.',
  async run(rig) {
    await startWithStock(rig, 'SKU-C', 10);
    rig.faults.arm('reserve.after-commit');
    const { eventId } = await rig.producer.placeOrder('SKU-C', 3);
    await rig.producer.drainOutbox();
    rig.facts.eventId = eventId;
    await rig.run.waitFor(() => rig.faults.fired.length > 0, 'the fault after the commit');
    rig.run.faultEnded('the consumer failed after its COMMIT', rig.faults.fired[0]?.at);
    // the peer's own way: delivered again after its visibility timeout or redelivery, or not
    if (await rig.peerSettled([eventId])) return;
    await rig.run.waitForLine(eventId, 'duplicate');
    await rig.run.waitForLine(eventId, 'acked');
  },
  async check(rig, m) {
    const stock = await stockOf(rig, 'SKU-C');
    return [
      check(rig.faults.fired.length === 1, `the fault fired once (${rig.faults.fired.length})`),
      check(m.effects === 1, `one reservation (got ${m.effects})`),
      check(stock.reserved === 3, `3 units reserved (got ${stock.reserved})`),
      // a peer with an inbox meets the fault inside its own transaction: nothing to deliver again
      ...ours(rig, [
        check(m.deliveries >= 2, `delivered again after the crash (${m.deliveries} deliveries)`),
      ]),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) => {
    const fired = rig.faults.fired[0]?.at;
    const again = m.lines.find((l) => l.step === 'received' && fired !== undefined && l.at > fired);
    const gap = fired !== undefined && again ? ms(again.at - fired) : '?';
    if (rig.configuration.peer) {
      const effects = rig.run.linesOf(String(rig.facts.eventId), 'effect-committed').length;
      return `committed, not acknowledged → ${rig.configuration.unsettled}; back after ${gap}: ${m.duplicatesAbsorbed > 0 ? `recognised as a duplicate (${m.duplicatesAbsorbed})` : 'not recognised'}, ${effects} effect(s) committed`;
    }
    return `committed, not acknowledged → ${rig.configuration.unsettled}; back after ${gap}, absorbed as a duplicate`;
  },
};

/** Refused orders are a business result, not an error. */
export const outOfStock: Scenario = {
  id: 'out-of-stock',
  title: 'Out of stock (business result)',
  stimulus:
    'An order for 5 units of a SKU with 2 in stock, delivered twice (the relay published it twice).',
  invariant:
    'Rejected as a result: one inventory.reservation_rejected event (even when delivered twice), no retry, nothing parked.',
  async run(rig) {
    await orderDeliveredTwice(rig, { sku: 'SKU-O', stock: 2, quantity: 5 });
  },
  async check(rig, m) {
    const stock = await stockOf(rig, 'SKU-O');
    return [
      check(m.effectsByStatus.rejected === 1, `one rejected reservation (got ${m.effects})`),
      ...ours(rig, [
        check(m.rejectionEvents === 1, `one rejection event (got ${m.rejectionEvents})`),
      ]),
      check(stock.reserved === 0, `nothing reserved (got ${stock.reserved})`),
      check(m.retries === 0, `no retry (got ${m.retries})`),
      check(m.parked.length === 0, `nothing parked (got ${m.parked.length})`),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) =>
    rig.configuration.peer
      ? `rejected as a result by the handler: ${m.effectsByStatus.rejected ?? 0} rejection(s) recorded for one order delivered ${m.deliveries} time(s)`
      : `rejected (out_of_stock) as a result: ${m.rejectionEvents} inventory.reservation_rejected in inventory_outbox (id derived from the message id); ${m.duplicatesAbsorbed} duplicate added none`,
};

const ORDERS = 60;
const DUPLICATES = 12;

/** Several consumers at once, with duplicates among the deliveries, on contended stock. */
export const concurrencyDuplicates: Scenario = {
  id: 'concurrency-duplicates',
  title: 'Consumer concurrency with duplicates',
  stimulus: `${ORDERS} orders on 3 SKUs with too little stock for all; ${DUPLICATES} of them published twice; 3 consumers (or invocations) at once where the configuration allows.`,
  invariant:
    'Every order decided exactly once (reserved or rejected); reserved totals equal the sum of reserved orders; stock never over-reserved.',
  async run(rig) {
    for (const sku of ['SKU-1', 'SKU-2', 'SKU-3']) await rig.database.stock(sku, 20);
    await rig.startConsumer({ concurrency: 3 });
    rig.run.begin();
    await placeOrders(rig, ORDERS, (n) => ({ sku: `SKU-${(n % 3) + 1}`, quantity: (n % 4) + 1 }));
    const envelopes = await rig.producer.outboxEnvelopes();
    await rig.producer.drainOutbox();
    const again = envelopes.filter((_, i) => i % 5 === 2).slice(0, DUPLICATES);
    await rig.producer.publish(...again);
    rig.run.mark(`${again.length} events published a second time`);
    if (await rig.peerSettled(envelopes.map((e) => e.id))) return;
    await rig.run.waitFor(() => {
      const committed = new Set(
        rig.run.recorder.lines.filter((l) => l.step === 'effect-committed').map((l) => l.messageId),
      );
      const dups = rig.run.recorder.lines.filter((l) => l.step === 'duplicate').length;
      const dropped = again.filter((e) => rig.producer.droppedCopies.has(e.id)).length;
      return committed.size >= ORDERS && dups + dropped >= again.length;
    }, `${ORDERS} effects and ${DUPLICATES} duplicates`);
  },
  async check(rig, m) {
    const totals = await reservedTotals(rig);
    return [
      check(m.effects === ORDERS, `${ORDERS} orders decided (got ${m.effects})`),
      ...ours(rig, [
        check(m.inboxRows === ORDERS, `${ORDERS} inbox rows (got ${m.inboxRows})`),
        check(
          m.duplicatesAbsorbed + m.droppedCopies >= DUPLICATES,
          `${DUPLICATES} duplicates absorbed (${m.duplicatesAbsorbed} by the inbox, ${m.droppedCopies} dropped by the broker's deduplication)`,
        ),
      ]),
      totals.agree,
      check(
        totals.rows.every((r) => r.reserved <= r.available),
        'no SKU over-reserved',
      ),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) => {
    const concurrency =
      rig.configuration.consumer === 'amazonmq-trigger'
        ? '1 invocation at a time (one per Amazon MQ mapping)'
        : rig.configuration.consumer === 'worker'
          ? '3 worker channels'
          : rig.configuration.peer
            ? '3 at once (its own concurrency setting)'
            : '3 concurrent invocations';
    return `${concurrency}: ${m.deliveries} deliveries → ${m.effectsByStatus.reserved ?? 0} reserved, ${m.effectsByStatus.rejected ?? 0} rejected; ${m.duplicatesAbsorbed} duplicates absorbed`;
  },
};
