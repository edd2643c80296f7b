import { holdStockLock } from '../../devkit/dbControls.js';
import type { Scenario } from '../scenario.js';
import { ladderTotalMs } from '../settings.js';
import { check } from '../types.js';
import { list, ms, noDoubleEffect, ours, parkedLine, startWithStock, stockOf } from './common.js';

const failedOrRetried = (rig: Parameters<Scenario['run']>[0], eventId: string) =>
  rig.run.linesOf(eventId, 'retry-scheduled').length > 0 ||
  // a peer: its handler was called and the effect did not commit (the database is cut)
  (rig.configuration.peer !== undefined && rig.run.linesOf(eventId, 'received').length > 0) ||
  rig.run.marks.some((m) => m.kind === 'failed-invocation' && m.at >= rig.run.t0);

/** Inventory's database is unreachable for a moment, then back within the retry budget. */
export const dbOutageShort: Scenario = {
  id: 'db-outage-short',
  title: 'Database outage shorter than the budget',
  stimulus:
    "Inventory's database connection is cut before the order arrives and restored once the first attempt has failed.",
  invariant: 'Processed exactly once after the database is back; nothing parked.',
  async run(rig) {
    await rig.database.stock('SKU-S', 10);
    const { db, proxy } = await rig.database.proxied();
    await rig.startConsumer({ db });
    rig.run.begin();
    proxy.cut();
    rig.run.mark('database cut');
    const { eventId } = await rig.producer.placeOrder('SKU-S', 2);
    await rig.producer.drainOutbox();
    await rig.run.waitFor(() => failedOrRetried(rig, eventId), 'a failed first attempt');
    proxy.restore();
    rig.run.faultEnded('database back');
    rig.facts.outageMs = Date.now() - rig.run.t0;
    await rig.run.waitForLine(eventId, 'effect-committed');
    if (await rig.peerSettled([eventId])) return;
    await rig.run.waitFor(() => {
      const committed = rig.run.linesOf(eventId, 'effect-committed')[0]?.at ?? Infinity;
      return rig.run.linesOf(eventId, 'acked').some((l) => l.at >= committed);
    }, 'acknowledged after the commit');
  },
  async check(rig, m) {
    const stock = await stockOf(rig, 'SKU-S');
    return [
      check(m.effects === 1, `one reservation (got ${m.effects})`),
      check(stock.reserved === 2, `2 units reserved (got ${stock.reserved})`),
      check(m.parked.length === 0, `nothing parked (got ${m.parked.length})`),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) => {
    const how = rig.configuration.peer
      ? `${m.deliveries} deliveries (${rig.configuration.retry.split(':')[0]})`
      : m.retries > 0
        ? `${m.retries} retr${m.retries === 1 ? 'y' : 'ies'} after ${list(m.retryDelaysMs)} (${rig.configuration.retry.split(':')[0]})`
        : `${m.failedInvocations} failed invocation(s): no per-message retry while the database is unreachable, the batch went back to the broker`;
    return `database down for ${ms(Number(rig.facts.outageMs ?? 0))}: ${how}; reserved once`;
  },
};

/** Inventory's database stays unreachable for longer than the whole retry budget. */
export const dbOutageLong: Scenario = {
  id: 'db-outage-long',
  title: 'Database outage longer than the budget',
  stimulus:
    "Inventory's database connection is cut before the order arrives and stays cut until the message is parked.",
  invariant:
    'Not applied, not lost: after a bounded number of deliveries it is parked with a diagnosis (no hot loop).',
  async run(rig) {
    await rig.database.stock('SKU-L', 10);
    const { db, proxy } = await rig.database.proxied();
    await rig.startConsumer({ db });
    rig.run.begin();
    proxy.cut();
    rig.run.mark('database cut');
    const { eventId } = await rig.producer.placeOrder('SKU-L', 1);
    rig.facts.eventId = eventId;
    await rig.producer.drainOutbox();
    await rig.run.waitFor(
      async () => (await rig.parked(10)).some((p) => p.messageId === eventId),
      'parked',
      {
        timeoutMs: ladderTotalMs(rig.budget) * 3 + rig.settings.waitMs,
        intervalMs: 250,
      },
    );
    proxy.restore();
    rig.run.faultEnded('database back');
  },
  check(rig, m) {
    const parked = m.parked.filter((p) => p.messageId === rig.facts.eventId);
    // Every way of retrying is bounded: the ladder (attempts + first delivery), or the broker's
    // delivery limit if a consumer gave the whole batch back.
    const bound = Math.max(rig.budget.maxAttempts, rig.settings.deliveryLimit) + 2;
    const p = parked[0];
    return [
      check(parked.length === 1, `parked once (got ${parked.length})`),
      // The broker is up: every consumer, the Amazon MQ trigger's included, spends the ladder
      // and parks with its own diagnosis (not the broker's delivery limit).
      ...(rig.configuration.peer
        ? [
            check(
              p !== undefined && p.errorClass !== 'none recorded',
              `parked with a diagnosis (got ${p ? `${p.reason} via ${p.via}: ${p.error}` : 'none'})`,
            ),
          ]
        : []),
      ...ours(rig, [
        check(
          p?.via === 'consumer' && p.reason === 'exhausted' && p.errorClass === 'transient',
          `parked by the consumer, exhausted/transient (got ${p ? `${p.reason}/${p.errorClass} via ${p.via}` : 'none'})`,
        ),
        check(
          m.retries === rig.budget.maxAttempts,
          `the ladder's ${rig.budget.maxAttempts} retries (got ${m.retries})`,
        ),
      ]),
      check(m.effects === 0, `not applied (got ${m.effects})`),
      check(m.deliveries <= bound, `bounded deliveries: ${m.deliveries} ≤ ${bound}`),
      check(
        m.retries <= rig.budget.maxAttempts,
        `retries within the budget: ${m.retries} ≤ ${rig.budget.maxAttempts}`,
      ),
    ];
  },
  note: (rig, m) => {
    const how = rig.configuration.peer
      ? `each failed delivery: ${rig.configuration.unsettled}`
      : m.retries > 0
        ? `${m.retries} retries after ${list(m.retryDelaysMs)}`
        : `${m.failedInvocations} failed invocations (the batch requeued each time, no per-message retry)`;
    return `${m.deliveries} deliveries, ${how} → ${parkedLine(m)}`;
  },
};

/** A retry copy is confirmed, then the consumer fails before acknowledging the original. */
export const retryAckLost: Scenario = {
  id: 'retry-ack-lost',
  forPeers: {
    reason:
      'it injects a fault between our retry copy and the ack of the original; the peers make no retry copy',
    instead:
      "a failed message is left to the broker's redelivery (see db-outage-short), so there is no copy to lose",
  },
  title: 'Retry published, original ack lost',
  stimulus:
    'The first reservation write fails (SQLSTATE 40001); the retry is settled, then fault reserve.after-retry-publish (once) stops the consumer before it acknowledges the original.',
  invariant: 'Original and retry copy may both arrive: exactly one reservation.',
  async run(rig) {
    await startWithStock(rig, 'SKU-R', 10);
    await rig.database.failures.failNext(1);
    rig.faults.arm('reserve.after-retry-publish');
    const { eventId } = await rig.producer.placeOrder('SKU-R', 1);
    await rig.producer.drainOutbox();
    await rig.run.waitFor(() => rig.faults.fired.length > 0, 'the fault after the retry publish');
    await rig.run.waitForLine(eventId, 'effect-committed');
    // A retry copy exists unless a retry is the same message delivered again.
    const copies = rig.configuration.retryAs === 'redelivery' ? 1 : 2;
    await rig.run.waitForLine(eventId, 'acked', copies);
    rig.facts.copies = copies;
  },
  async check(rig, m) {
    const stock = await stockOf(rig, 'SKU-R');
    return [
      check(rig.faults.fired.length === 1, `the fault fired once (${rig.faults.fired.length})`),
      check(m.effects === 1, `one reservation (got ${m.effects})`),
      check(stock.reserved === 1, `1 unit reserved (got ${stock.reserved})`),
      check(m.parked.length === 0, `nothing parked (got ${m.parked.length})`),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) =>
    Number(rig.facts.copies) === 1
      ? `no copy exists (the retry is the same message delivered again): ${m.deliveries} deliveries, nothing to absorb`
      : `original and retry copy both delivered (${m.deliveries} deliveries): ${m.duplicatesAbsorbed} absorbed by the inbox`,
};

/** Processing takes longer than SQS's visibility timeout (RabbitMQ has no such lease). */
export const slowProcessing: Scenario = {
  id: 'slow-processing',
  forPeer: (c) =>
    c.peer === 'peer-powertools'
      ? {
          reason:
            "the peer's handler runs in the lab's process behind the SQS trigger emulation, which cannot end it at the function timeout as Lambda ends a sandbox; the outcome would be the emulation's, not Powertools'",
          instead:
            'on Lambda the blocked invocation is ended at its timeout (its transaction rolled back with its connection) and the record comes back after the visibility timeout; ours bounds the transaction itself (transactionDeadline), which the lab can show',
        }
      : undefined,
  title: 'Processing longer than the visibility timeout / lease',
  stimulus:
    'The stock row is locked so processing blocks for 1.5 × the SQS visibility timeout (so longer than the function timeout too, which must be ≤ 1/6 of it), with two consumers.',
  invariant: 'However many deliveries run at once, one reservation.',
  async run(rig) {
    await startWithStock(rig, 'SKU-W', 10, { concurrency: 2 });
    const release = await holdStockLock(rig.inventoryDb, 'SKU-W');
    rig.run.mark('stock row locked: processing blocks');
    try {
      const { eventId } = await rig.producer.placeOrder('SKU-W', 1);
      rig.facts.eventId = eventId;
      await rig.producer.drainOutbox();
      await rig.run.waitForLine(eventId, 'received');
      const holdMs = rig.settings.visibilityTimeoutSeconds * 1_500;
      const second = await rig.run.observe(
        () => rig.run.linesOf(eventId, 'received').length >= 2,
        holdMs,
      );
      rig.facts.second = second;
    } finally {
      await release();
      rig.run.faultEnded('lock released');
    }
    const eventId = String(rig.facts.eventId);
    await rig.run.waitForLine(eventId, 'effect-committed');
    if (await rig.peerSettled([eventId])) return;
    // every delivery settled: acked, or retried (a bounded lock wait, as deployed), or its
    // invocation killed at the function timeout (a deployed bundle, as Lambda does)
    await rig.run.waitFor(() => {
      const n = (step: Parameters<typeof rig.run.linesOf>[1]) =>
        rig.run.linesOf(eventId, step).length;
      const killed = rig.run.marks.filter(
        (x) =>
          x.kind === 'failed-invocation' && /Sandbox\.Timedout/.test(x.label) && x.at >= rig.run.t0,
      ).length;
      return n('acked') >= 1 && n('acked') + n('retry-scheduled') + killed >= n('received');
    }, 'every delivery settled');
  },
  async check(rig, m) {
    const stock = await stockOf(rig, 'SKU-W');
    return [
      check(m.effects === 1, `one reservation (got ${m.effects})`),
      check(stock.reserved === 1, `1 unit reserved (got ${stock.reserved})`),
      ...ours(rig, [check(m.inboxRows === 1, `one inbox row (got ${m.inboxRows})`)]),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) => {
    if (rig.configuration.peer) {
      const effects = rig.run.linesOf(String(rig.facts.eventId), 'effect-committed').length;
      return `${m.deliveries} deliveries (${rig.facts.second ? 'a second one while the first was blocked' : 'no second one while blocked'}) → ${effects} effect(s) committed`;
    }
    const timedOut = rig.run.marks.find(
      (x) =>
        x.kind === 'failed-invocation' &&
        /abort|Sandbox\.Timedout/i.test(x.label) &&
        x.at >= rig.run.t0,
    );
    const eventId = String(rig.facts.eventId);
    if (timedOut) {
      const back = rig.run.linesOf(eventId, 'received').find((l) => l.at > timedOut.at);
      const how = /Sandbox\.Timedout/.test(timedOut.label)
        ? 'killed the invocation (its transaction rolled back just before, by transactionDeadline)'
        : 'ended the invocation while its transaction went on';
      return `the ${ms(rig.settings.functionTimeoutMs)} function timeout ${how}; the batch came back ${back ? `${ms(back.at - timedOut.at)} later` : 'later'} (${rig.configuration.unsettled.split(',')[0]}), waited on the same lock, and the inbox made it a duplicate (${m.deliveries} deliveries)`;
    }
    if (m.retries > 0) {
      return `the lock outlasted the transaction's bounded lock wait: ${m.retries} retr${m.retries === 1 ? 'y' : 'ies'} (${rig.configuration.retry.split(':')[0]}), then reserved once (${m.deliveries} deliveries)`;
    }
    if (rig.facts.second) {
      return `the ${rig.settings.visibilityTimeoutSeconds} s visibility timeout expired mid-processing: ${m.deliveries} deliveries ran at once, the second waited on the same lock and the inbox made it a duplicate`;
    }
    return `no lease: the delivery stayed unacknowledged with its consumer (${m.deliveries} delivery) until done`;
  },
};
