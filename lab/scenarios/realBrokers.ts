import { holdStockLock } from '../../devkit/dbControls.js';
import type { SqsFaultLayer } from '../../devkit/emulators/sqsFaults.js';
import type { RoundResult } from '../../shared/outbox/OutboxRelay.js';
import { type Configuration, capabilitiesOf } from '../configurations.js';
import type { Rig } from '../rigs/index.js';
import type { NotApplicable, Scenario } from '../scenario.js';
import { check } from '../types.js';
import {
  fifoOnlyForOrder,
  ms,
  noDoubleEffect,
  ours,
  PRODUCER_SIDE_IS_OURS,
  placeOrders,
  releasedInOrder,
  startWithStock,
  v2Waited,
} from './common.js';

/**
 * What real brokers do that emulators do not: SQS's own duplicates, reordering, partial batch
 * failures, throttling and stale receipt handles (reproduced by the run's fault layer,
 * devkit/emulators/sqsFaults.ts, docs/sqs-faults.md), and their RabbitMQ counterparts where
 * RabbitMQ has one (a return for part of a confirm window, an ack on a closed channel).
 */

export const faultLayer = (rig: Rig): SqsFaultLayer => {
  const layer = rig.sqsFaults;
  if (!layer) throw new Error(`${rig.configuration.id}: no SQS fault layer`);
  return layer;
};

/**
 * Deliveries of an event that reached the consumer: each `received`, and each `duplicate` that
 * no `received` announced (a peer's deduplication store that answers before its handler, as
 * message-queue-toolkit's, journals a copy as `duplicate` alone).
 */
export function deliveriesOf(rig: Rig, eventId: string): number {
  let n = 0;
  let previous: string | undefined;
  for (const l of rig.run.linesOf(eventId)) {
    if (l.step === 'received' || (l.step === 'duplicate' && previous !== 'received')) n++;
    previous = l.step;
  }
  return n;
}

/**
 * Where the broker delivers a message twice on its own (`spontaneousDuplicates`: SQS standard
 * queues); `why` says what the configuration's broker does instead.
 */
const spontaneousDuplicatesOnly = (c: Configuration): NotApplicable | undefined =>
  capabilitiesOf(c).spontaneousDuplicates
    ? undefined
    : {
        reason: `${c.label} never delivers a message a second time on its own: a copy comes only after a failure (a closed channel or connection, an expired lease), flagged as a redelivery where the broker can`,
        instead:
          'see crash-after-commit and consumer-paused-past-lease for the copies it does make',
      };

/** Where the broker may deliver a key's messages out of order (`orderedPerKey` false). */
const unorderedOnly = (c: Configuration): NotApplicable | undefined =>
  capabilitiesOf(c).orderedPerKey
    ? {
        reason: `${c.label} delivers a key's messages in publish order: order changes only through retries and redeliveries`,
        instead: 'out-of-order shows the reordering a retry causes, on every configuration',
      }
    : undefined;

const DUP_ORDERS = 3;

/** A standard queue delivers a message a second time, with no retry and no crash anywhere. */
export const sqsSpontaneousDuplicate: Scenario = {
  id: 'sqs-spontaneous-duplicate',
  title: 'SQS delivers a message twice on its own',
  stimulus: `${DUP_ORDERS} orders; the SQS fault layer delivers one of the messages a second time, with a new receipt handle, to the next receive while the first copy is still being processed (at-least-once delivery of standard queues).`,
  invariant: `${DUP_ORDERS} reservations, none twice: the second copy is recognised by the inbox.`,
  notApplicable: spontaneousDuplicatesOnly,
  async run(rig) {
    const layer = faultLayer(rig);
    await startWithStock(rig, 'SKU-SD', 100, { concurrency: 2 });
    layer.arm({ kind: 'duplicate', count: 1 });
    rig.run.mark('fault layer: the next message received is delivered twice');
    const placed = await placeOrders(rig, DUP_ORDERS, () => ({ sku: 'SKU-SD', quantity: 1 }));
    await rig.producer.drainOutbox();
    await rig.run.waitFor(() => layer.count('duplicate') >= 1, 'the copy delivered');
    const copied = layer.events.find((e) => e.kind === 'duplicate')?.eventIds[0];
    rig.facts.copied = copied;
    rig.run.faultEnded('copy delivered');
    await rig.waitSettled(placed.map((p) => p.eventId));
    if (copied && !rig.configuration.peer) await rig.run.waitForLine(copied, 'acked', 2);
  },
  async check(rig, m) {
    const copied = rig.facts.copied as string | undefined;
    return [
      check(copied !== undefined, 'the fault layer delivered a copy of an order event'),
      check(m.effects === DUP_ORDERS, `${DUP_ORDERS} reservations (got ${m.effects})`),
      check(
        copied !== undefined && deliveriesOf(rig, copied) >= 2,
        'the copy reached the consumer',
      ),
      ...ours(rig, [
        check(m.duplicatesAbsorbed >= 1, `the copy absorbed (${m.duplicatesAbsorbed})`),
        check(m.inboxRows === DUP_ORDERS, `${DUP_ORDERS} inbox rows (got ${m.inboxRows})`),
      ]),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) => {
    const copied = String(rig.facts.copied);
    const [first, second] = rig.run.linesOf(copied, 'received');
    const gap = first && second ? ms(second.at - first.at) : '?';
    return `a second copy ${gap} after the first, no retry involved: ${m.duplicatesAbsorbed > 0 ? `recognised as a duplicate (${m.duplicatesAbsorbed})` : 'not recognised'}, ${rig.run.linesOf(copied, 'effect-committed').length} effect(s) for it`;
  },
};

/** A standard queue returns an order's two events in the other order. */
export const sqsReordered: Scenario = {
  id: 'sqs-reordered',
  forPeers: {
    reason:
      "the peers' handlers are written for order.created (the job they are compared on); none of them orders an aggregate's events by version",
    instead: "an order.cancelled first would be the handler's own business",
  },
  title: 'SQS returns messages out of send order',
  stimulus:
    'An order is placed and cancelled (v1 created, v2 cancelled, sent in one batch, in order); the SQS fault layer returns them reversed (or holds the first one back behind the next), as a standard queue may (best-effort ordering).',
  invariant:
    'The ordering policy decides, not the arrival order: v2 waits until v1 is applied; final state released at version 2; each applied once.',
  notApplicable: unorderedOnly,
  async run(rig) {
    const layer = faultLayer(rig);
    await startWithStock(rig, 'SKU-SR', 10);
    const { orderId, eventId: v1 } = await rig.producer.placeOrder('SKU-SR', 4);
    const { eventId: v2 } = await rig.producer.cancelOrder(orderId);
    Object.assign(rig.facts, { v1, v2, orderId });
    layer.arm({ kind: 'reorder', count: 1 });
    rig.run.mark('fault layer: the next receive answers out of order');
    await rig.producer.drainOutbox();
    await rig.run.waitFor(() => layer.count('reorder') >= 1, 'a reordered answer');
    rig.run.faultEnded('reordered answer delivered');
    await rig.run.waitForLine(v2, 'effect-committed');
    await rig.waitSettled([v1, v2]);
  },
  async check(rig, m) {
    const firstIn = m.lines.find((l) => l.step === 'received')?.messageId;
    return [
      ...(await releasedInOrder(rig, m, 'SKU-SR')),
      check(firstIn === rig.facts.v2, 'v2 was received first (the layer reordered them)'),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) =>
    `v2 arrived first: deferred ${m.deferrals}× (missing predecessor), applied ${v2Waited(rig, m)} after it arrived, after v1`,
};

const WINDOW = 6;

/** Part of one publish window fails: SQS batch entries, RabbitMQ returns. */
export const publishPartiallyFailed: Scenario = {
  id: 'publish-partially-failed',
  forPeers: PRODUCER_SIDE_IS_OURS,
  title: 'Publish partially failed',
  stimulus: `${WINDOW / 2} orders placed and ${WINDOW / 2} of them cancelled before one relay round (a window of ${WINDOW}). SQS: the fault layer fails every second entry of the SendMessageBatch (not enqueued, reported in Failed). RabbitMQ: the cancellations' routes are removed, so the broker returns them (mandatory) while it confirms the rest (the relay's route check is off here: a lost route, which the check holds back and whose window it republishes, is not this scenario's fault).`,
  invariant:
    'Exactly the failed part stays unpublished and is published again; nothing published twice by the relay; every event applied once.',
  notApplicable: (c) => c.cannot?.['partial-publish'] ?? fifoOnlyForOrder(c),
  async run(rig) {
    await startWithStock(rig, 'SKU-PF', 100);
    const placed = await placeOrders(rig, WINDOW / 2, () => ({ sku: 'SKU-PF', quantity: 1 }));
    for (const p of placed) await rig.producer.cancelOrder(p.orderId);
    const partial = await rig.failPartOfNextPublish();
    if (!partial)
      throw new Error(`${rig.configuration.id}: part of a publish cannot be made to fail`);
    rig.run.mark(partial.mark);
    // the publisher's connection is new: connected first, so the round is not skipped for a broker
    // that does not answer within the relay's short readiness wait (RELAY_OPTIONS) on a busy machine
    await partial.publisher?.ready(10_000);
    const round: RoundResult = await rig.producer.relay(partial.publisher).runOnce();
    rig.facts.round = round;
    rig.facts.unpublishedAfterRound = await rig.producer.unpublished();
    rig.run.mark(`relay round: ${round.published} confirmed, ${round.failed} failed`);
    await partial.restore();
    rig.facts.brokerAnswer = partial.note(round);
    rig.run.faultEnded('the failed part can be published');
    await rig.producer.drainOutbox(partial.publisher);
    const ids = [...rig.run.accepted.keys()];
    // a cancellation that overtook its order is deferred (acknowledged, retried later): wait for
    // every effect, not only for an acknowledgement of each event
    for (const id of ids) await rig.run.waitForLine(id, 'effect-committed');
    await rig.waitSettled(ids);
  },
  async check(rig, m) {
    const round = rig.facts.round as RoundResult;
    const { rows } = await rig.inventoryDb.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM reservations WHERE status = 'released'",
    );
    return [
      check(
        round.published === WINDOW / 2 && round.failed === WINDOW / 2,
        `the round: ${WINDOW / 2} confirmed, ${WINDOW / 2} failed (got ${round.published}, ${round.failed})`,
      ),
      check(
        rig.facts.unpublishedAfterRound === WINDOW / 2,
        `exactly the failed part unpublished (${rig.facts.unpublishedAfterRound})`,
      ),
      check(m.outboxUnpublished === 0, 'all published in the end'),
      check(
        m.duplicatesAbsorbed === 0,
        `no confirmed event sent again (${m.duplicatesAbsorbed} duplicates)`,
      ),
      check(rows[0]?.n === WINDOW / 2, `${WINDOW / 2} released (got ${rows[0]?.n})`),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) => `${rig.facts.brokerAnswer}; ${m.deliveries} deliveries`,
};

const THROTTLED_ORDERS = 20;
const THROTTLE_MS = 2_000;

/** The broker refuses requests for a while. */
export const brokerThrottled: Scenario = {
  id: 'broker-throttled',
  title: 'Broker throttled',
  stimulus: `SQS answers every request with ThrottlingException for ${THROTTLE_MS / 1000} s (fault layer) while ${THROTTLED_ORDERS} orders are placed and relayed.`,
  invariant: `Nothing lost, nothing applied twice: all ${THROTTLED_ORDERS} reserved once the throttling ends.`,
  notApplicable: (c) => c.cannot?.throttle ?? fifoOnlyForOrder(c),
  async run(rig) {
    const layer = faultLayer(rig);
    await startWithStock(rig, 'SKU-T', 1_000);
    layer.arm({ kind: 'throttle', forMs: THROTTLE_MS, error: 'ThrottlingException' });
    const until = Date.now() + THROTTLE_MS;
    rig.run.mark(`fault layer: every request throttled for ${THROTTLE_MS / 1000} s`);
    const placed = await placeOrders(rig, THROTTLED_ORDERS, () => ({ sku: 'SKU-T', quantity: 1 }));
    const relay = rig.producer.relayLoop();
    try {
      await rig.run.waitFor(() => Date.now() >= until, 'the throttling window', {
        timeoutMs: THROTTLE_MS + 5_000,
      });
      rig.facts.throttled = layer.count('throttle');
      rig.facts.unpublishedDuring = await rig.producer.unpublished();
      rig.run.faultEnded('throttling over');
      await rig.run.waitFor(async () => (await rig.producer.unpublished()) === 0, 'outbox drained');
    } finally {
      await relay.stop();
    }
    await rig.waitSettled(placed.map((p) => p.eventId));
  },
  async check(rig, m) {
    return [
      check(Number(rig.facts.throttled) > 0, `requests throttled (${rig.facts.throttled})`),
      check(m.outboxUnpublished === 0, 'all published afterwards'),
      check(m.effects === THROTTLED_ORDERS, `${THROTTLED_ORDERS} reservations (got ${m.effects})`),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) =>
    `${rig.facts.throttled} requests answered ThrottlingException; ${rig.facts.unpublishedDuring} of ${THROTTLED_ORDERS} rows still unpublished when it ended (${m.outboxRetriedRows} charged an attempt); then ${m.effects} reserved`,
};

/** The consumer settles a delivery that is no longer its own. */
export const staleAck: Scenario = {
  id: 'stale-ack',
  title: 'Stale acknowledgement',
  stimulus:
    "SQS: the consumer's delete uses a receipt handle that is no longer the latest (the fault layer answers success and deletes nothing, as SQS does). RabbitMQ: the consumer's connection drops while it processes (a proxy cut), so its ack goes to a closed channel.",
  invariant:
    'The message comes back after its lease and is recognised as a duplicate: one reservation, nothing lost.',
  forPeer: (c) =>
    c.brokerFaults === 'proxy'
      ? {
          reason:
            "it cuts the consumer's own broker connection through a proxy of the lab's; a peer opens its connection itself",
          instead: 'crash-after-commit shows how the peer treats a delivery it could not settle',
        }
      : undefined,
  async run(rig) {
    await rig.database.stock('SKU-SA', 10);
    if (rig.sqsFaults) {
      await rig.startConsumer();
      rig.run.begin();
      faultLayer(rig).arm({ kind: 'stale-receipt', count: 1 });
      rig.run.mark('fault layer: the next delete meets a stale receipt handle');
      const { eventId } = await rig.producer.placeOrder('SKU-SA', 1);
      rig.facts.eventId = eventId;
      await rig.producer.drainOutbox();
      await rig.run.waitFor(() => faultLayer(rig).count('stale-receipt') >= 1, 'a stale delete');
      rig.run.faultEnded('stale delete answered');
      if (rig.configuration.peer) {
        await rig.run.waitFor(
          () => deliveriesOf(rig, eventId) >= 2,
          'delivered again after the visibility timeout',
        );
        await rig.waitSettled([eventId]);
        return;
      }
      await rig.run.waitForLine(eventId, 'duplicate');
      await rig.run.waitForLine(eventId, 'acked', 2);
      return;
    }
    const via = await rig.proxiedBroker();
    if (!via) throw new Error(`${rig.configuration.id}: no proxied broker connection`);
    const { proxy } = via;
    await rig.children.startConsumer('consumer', via.child);
    rig.run.begin();
    const release = await holdStockLock(rig.inventoryDb, 'SKU-SA');
    rig.run.mark('stock row locked: processing blocks');
    let eventId: string;
    try {
      ({ eventId } = await rig.producer.placeOrder('SKU-SA', 1));
      rig.facts.eventId = eventId;
      await rig.producer.drainOutbox();
      await rig.run.waitForLine(eventId, 'received');
      proxy.cut();
      rig.run.mark("the consumer's connection dropped while it processes");
    } finally {
      await release();
      rig.run.mark('lock released: the handler commits, its ack meets a closed channel');
    }
    await rig.run.waitForLine(eventId, 'effect-committed');
    proxy.restore();
    rig.run.faultEnded('the broker reachable again');
    await rig.run.waitForLine(eventId, 'duplicate');
    await rig.run.waitForLine(eventId, 'acked');
  },
  async check(rig, m) {
    const eventId = String(rig.facts.eventId);
    return [
      check(m.effects === 1, `one reservation (got ${m.effects})`),
      check(
        deliveriesOf(rig, eventId) >= 2,
        `delivered again (${deliveriesOf(rig, eventId)} deliveries)`,
      ),
      ...ours(rig, [check(m.duplicatesAbsorbed >= 1, `absorbed (${m.duplicatesAbsorbed})`)]),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) => {
    const eventId = String(rig.facts.eventId);
    const [first, second] = rig.run.linesOf(eventId, 'received');
    const gap = first && second ? ms(second.at - first.at) : '?';
    return rig.sqsFaults
      ? `the delete "succeeded" and deleted nothing: back after ${gap} (its visibility timeout), ${m.duplicatesAbsorbed > 0 ? 'absorbed as a duplicate' : 'not recognised'}`
      : `the broker requeued the delivery when the connection dropped; the late ack went nowhere; delivered again ${gap} after the first delivery, absorbed as a duplicate`;
  },
};
