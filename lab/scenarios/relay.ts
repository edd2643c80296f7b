import type { DrainResult, RoundResult } from '../../shared/outbox/OutboxRelay.js';
import type { Scenario } from '../scenario.js';
import { check } from '../types.js';
import {
  ms,
  noDoubleEffect,
  PRODUCER_SIDE_IS_OURS,
  placeOrders,
  startWithStock,
} from './common.js';

/** The relay publishes where no queue is bound (RabbitMQ) or to a queue that is gone (SQS). */
export const unroutable: Scenario = {
  id: 'unroutable',
  forPeers: PRODUCER_SIDE_IS_OURS,
  title: 'Unroutable publish / missing queue',
  stimulus:
    'The route to the consumer is removed (RabbitMQ: the bindings of `orders`; SQS: the queue itself) before the relay runs; one relay round; then the route is restored.',
  invariant:
    'The row is not marked published while nothing can receive it; once the route is back it is published and reserved exactly once.',
  async run(rig) {
    await startWithStock(rig, 'SKU-U', 10);
    await rig.breakRoute();
    rig.run.mark('route removed');
    const { eventId } = await rig.producer.placeOrder('SKU-U', 1);
    const round: RoundResult = await rig.producer.relay().runOnce();
    rig.facts.round = round;
    const { rows } = await rig.ordersDb.query<{ attempts: number; last_error: string | null }>(
      'SELECT attempts, last_error FROM outbox WHERE id = $1',
      [eventId],
    );
    rig.facts.row = rows[0];
    rig.facts.unpublishedAfterRound = await rig.producer.unpublished();
    rig.run.mark(
      round.brokerUnavailable
        ? 'relay round: destination unavailable, nothing claimed'
        : `relay round: ${rows[0]?.last_error}`,
    );
    await rig.restoreRoute();
    rig.run.faultEnded('route restored');
    await rig.producer.drainOutbox();
    await rig.run.waitForLine(eventId, 'acked');
  },
  check(rig, m) {
    const round = rig.facts.round as RoundResult;
    return [
      check(
        round.published === 0,
        `nothing marked published in the broken round (${round.published})`,
      ),
      check(
        rig.facts.unpublishedAfterRound === 1,
        `the row stayed unpublished (${rig.facts.unpublishedAfterRound})`,
      ),
      check(m.outboxUnpublished === 0, 'published after the route came back'),
      check(m.effects === 1, `one reservation (got ${m.effects})`),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig) => {
    const round = rig.facts.round as RoundResult;
    const row = rig.facts.row as { attempts: number; last_error: string | null } | undefined;
    if (round.brokerUnavailable) {
      return 'no mandatory/return on SQS: the queue check failed (QueueDoesNotExist), the round claimed nothing and charged no attempt; published once the queue existed';
    }
    return `row charged attempt ${row?.attempts} with "${(row?.last_error ?? '').slice(0, 90)}", retried with backoff, published once the route was back`;
  },
};

const ORDERS = 200;

/** The broker is unreachable from the relay while orders keep coming (seed exercise). */
export const brokerDownRelay: Scenario = {
  id: 'broker-down-relay',
  forPeers: PRODUCER_SIDE_IS_OURS,
  title: `Broker down during relay (${ORDERS} orders)`,
  stimulus: `The relay's connection to the broker is cut; ${ORDERS} orders are placed through the API; the broker comes back.`,
  invariant: `All ${ORDERS} published once the broker is back and each reserved exactly once; nothing lost.`,
  async run(rig) {
    await rig.database.stock('SKU-B', 1_000);
    await rig.startConsumer();
    const { publisher, proxy } = await rig.proxiedPublisher();
    const relay = rig.producer.relay(publisher);
    await relay.runOnce(); // connects through the proxy
    rig.run.begin();
    proxy.cut();
    rig.run.mark('broker cut (relay side)');
    const loop = rig.producer.relayLoop(relay);
    try {
      await placeOrders(rig, ORDERS, () => ({ sku: 'SKU-B', quantity: 1 }), 20);
      await rig.run.waitFor(() => proxy.refused >= 2, 'the relay kept trying');
      rig.facts.unpublishedDuringOutage = await rig.producer.unpublished();
      proxy.restore();
      rig.run.faultEnded('broker back');
      rig.facts.outageMs = Date.now() - rig.run.t0;
      rig.facts.refused = proxy.refused;
      await rig.run.waitFor(async () => (await rig.producer.unpublished()) === 0, 'outbox drained');
    } finally {
      rig.facts.drain = await loop.stop();
    }
    await rig.run.waitFor(
      () =>
        new Set(
          rig.run.recorder.lines
            .filter((l) => l.step === 'effect-committed')
            .map((l) => l.messageId),
        ).size >= ORDERS,
      `${ORDERS} reserved`,
    );
  },
  check(rig, m) {
    return [
      check(
        rig.facts.unpublishedDuringOutage === ORDERS,
        `none marked published during the outage (${rig.facts.unpublishedDuringOutage} unpublished)`,
      ),
      check(m.outboxUnpublished === 0, 'all published afterwards'),
      check(m.effects === ORDERS, `${ORDERS} reservations (got ${m.effects})`),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) => {
    const drain = rig.facts.drain as DrainResult;
    return `outage ${ms(Number(rig.facts.outageMs))}: ${drain.brokerUnavailableRounds} relay rounds found the broker unavailable and claimed nothing (${rig.facts.refused} connections refused, ${m.outboxRetriedRows} rows charged an attempt); then ${drain.published} published, ${m.effects} reserved`;
  },
};

const CRASHED = 5;

/** The relay dies between the broker's confirm and marking the rows published. */
export const relayCrash: Scenario = {
  id: 'relay-crash',
  forPeers: PRODUCER_SIDE_IS_OURS,
  title: 'Relay crash after publish, before mark',
  stimulus: `${CRASHED} orders; fault relay.after-publish (once): the broker confirmed the round, the relay fails before marking it; the next round runs normally.`,
  invariant:
    'A duplicate with the same id, never a loss: every order reserved exactly once; the copies are absorbed by the inbox.',
  async run(rig) {
    await startWithStock(rig, 'SKU-Z', 100);
    const ids: string[] = [];
    for (let i = 0; i < CRASHED; i++) ids.push((await rig.producer.placeOrder('SKU-Z', 1)).eventId);
    rig.faults.arm('relay.after-publish');
    await rig.producer.drainOutbox();
    // the crashed round had sent them all: uncertain publishes, which arrived anyway
    rig.run.markUncertain(ids);
    const crashed = rig.faults.fired[0]?.at;
    if (crashed !== undefined) rig.run.faultEnded('the relay failed; the next round runs', crashed);
    for (const id of ids) {
      await rig.run.waitForLine(id, 'effect-committed');
      // a copy the broker dropped (its deduplication window) never reaches the inbox
      if (!rig.producer.droppedCopies.has(id)) await rig.run.waitForLine(id, 'duplicate');
    }
  },
  check(rig, m) {
    return [
      check(rig.faults.fired.length === 1, `the relay failed once (${rig.faults.fired.length})`),
      check(m.outboxUnpublished === 0, 'every row marked published in the end'),
      check(m.effects === CRASHED, `${CRASHED} reservations (got ${m.effects})`),
      check(
        m.duplicatesAbsorbed + m.droppedCopies >= CRASHED,
        `${CRASHED} copies absorbed (${m.duplicatesAbsorbed} by the inbox, ${m.droppedCopies} dropped by the broker's deduplication)`,
      ),
      ...noDoubleEffect(m),
    ];
  },
  note: (_rig, m) =>
    `the round rolled back after the confirm; the next one published the same ids again: ${m.deliveries} deliveries, ${m.duplicatesAbsorbed} absorbed by the inbox, ${m.droppedCopies} dropped by the broker, ${m.effects} reserved`,
};
