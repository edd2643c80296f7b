import { holdStockLock } from '../../devkit/dbControls.js';
import { sleep } from '../../shared/util/async.js';
import { capabilitiesOf } from '../configurations.js';
import type { Rig } from '../rigs/index.js';
import type { LabProcess } from '../rigs/processes.js';
import type { NotApplicable, Scenario } from '../scenario.js';
import { check } from '../types.js';
import {
  ms,
  noDoubleEffect,
  PRODUCER_SIDE_IS_OURS,
  placeOrders,
  queueIdle,
  reservedTotals,
  stockOf,
} from './common.js';
import { faultLayer } from './realBrokers.js';

/**
 * Real processes, really killed and frozen: the consumer and the relay run as child processes
 * (lab/child.ts) that a scenario SIGKILLs, SIGSTOPs and SIGCONTs. Nothing here throws in the
 * lab's own process: a killed process runs no finally block, sends no ack, marks nothing.
 */

const PEERS_IN_PROCESS: NotApplicable = {
  reason:
    "the peers run in the lab's process (their own pollers and clients, set up as their users would), which the lab cannot kill or freeze without killing itself",
  instead:
    'crash-after-commit and slow-processing show how each peer treats a delivery it did not settle in time',
};

/** Waits until `count()` has stopped changing for `quietMs`; returns it. */
async function settledCount(rig: Rig, count: () => number, quietMs: number): Promise<number> {
  let last = count();
  let since = Date.now();
  await rig.run.waitFor(() => {
    const now = count();
    if (now !== last) {
      last = now;
      since = Date.now();
    }
    return Date.now() - since >= quietMs;
  }, `a stable count (${last})`);
  return last;
}

const inboxRows = async (rig: Rig) => {
  const { rows } = await rig.inventoryDb.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM processed_messages',
  );
  return rows[0]?.n ?? 0;
};

/** A consumer frozen while it holds a message, past the lease the broker gave it. */
export const consumerPausedPastLease: Scenario = {
  id: 'consumer-paused-past-lease',
  forPeers: PEERS_IN_PROCESS,
  // its child processes' start-up loads the machine: not beside the timing-sensitive runs
  alone: true,
  title: 'Consumer paused past its lease',
  stimulus:
    'Consumer process A takes an order while the stock row is locked, and is frozen (SIGSTOP) past its lease (SQS: the visibility timeout; RabbitMQ: the heartbeat timeout); consumer process B receives the same message; the lock is released; A is resumed (SIGCONT) and carries on as if no time had passed.',
  invariant:
    'Two processes held the same message at once; one reservation; every delivery settled, nothing lost.',
  async run(rig) {
    await rig.database.stock('SKU-P', 10);
    const a = await rig.children.startConsumer('consumer A', rig.consumerLease().child);
    rig.run.begin();
    const release = await holdStockLock(rig.inventoryDb, 'SKU-P');
    rig.run.mark('stock row locked: processing blocks');
    let b: LabProcess | undefined;
    let eventId: string;
    try {
      ({ eventId } = await rig.producer.placeOrder('SKU-P', 1));
      rig.facts.eventId = eventId;
      await rig.producer.drainOutbox();
      await rig.run.waitFor(() => a.receivedIds.includes(eventId), 'A received the order');
      a.pause();
      const pausedAt = Date.now();
      rig.facts.pausedAt = pausedAt;
      rig.run.mark('consumer A frozen (SIGSTOP) holding the message');
      b = await rig.children.startConsumer('consumer B', rig.consumerLease().child);
      await rig.run.waitFor(() => b?.receivedIds.includes(eventId), 'B received the same message');
      rig.facts.secondAfterMs = Date.now() - pausedAt;
      rig.run.mark('consumer B holds the same message');
    } finally {
      await release();
      rig.run.mark('lock released');
    }
    // A stays frozen a while longer: whatever B can finish alone, it finishes
    await sleep(500);
    a.resume();
    rig.run.faultEnded('consumer A resumed (SIGCONT)');
    rig.facts.received = { a: a.received, b: b?.received ?? 0 };
    await rig.run.waitForLine(eventId, 'effect-committed');
    await rig.run.waitTwice(() => queueIdle(rig), 'the queue idle', 200);
    await rig.run.waitForLine(eventId, 'acked');
    rig.facts.received = { a: a.received, b: b?.received ?? 0 };
  },
  async check(rig, m) {
    const r = rig.facts.received as { a: number; b: number };
    const stock = await stockOf(rig, 'SKU-P');
    return [
      check(r.a >= 1 && r.b >= 1, `both processes held the message (A ${r.a}, B ${r.b})`),
      check(m.effects === 1, `one reservation (got ${m.effects})`),
      check(stock.reserved === 1, `1 unit reserved (got ${stock.reserved})`),
      check(m.inboxRows === 1, `one inbox row (got ${m.inboxRows})`),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) =>
    `A frozen past ${rig.consumerLease().text}: B had the message ${ms(Number(rig.facts.secondAfterMs))} after the freeze; ${m.deliveries} deliveries, ${m.duplicatesAbsorbed} absorbed as duplicate(s), ${m.retries} retried, one reservation`,
};

const LOAD_ORDERS = 500;
const KILL_EVERY_MS = 2_000;
const MIN_KILLS = 3;

/** The consumer process is SIGKILLed again and again while orders flow. */
export const repeatedKillUnderLoad: Scenario = {
  id: 'repeated-kill-under-load',
  forPeers: PEERS_IN_PROCESS,
  alone: true,
  title: `Consumer killed repeatedly under load (${LOAD_ORDERS} orders)`,
  stimulus: `${LOAD_ORDERS} orders flow through the API and the relay while the consumer process (3 at once where the configuration allows) is SIGKILLed every ${KILL_EVERY_MS / 1000} s (at least ${MIN_KILLS} times) and started again.`,
  invariant: `Every order decided exactly once: ${LOAD_ORDERS} effects, none twice, none lost; reserved totals equal the reserved orders.`,
  async run(rig) {
    const skus = ['SKU-K1', 'SKU-K2', 'SKU-K3', 'SKU-K4', 'SKU-K5'];
    for (const sku of skus) await rig.database.stock(sku, 1_000);
    let consumer = await rig.children.startConsumer('consumer 1', { concurrency: 3 });
    rig.run.begin();
    const relay = rig.producer.relayLoop(rig.producer.relay(), rig.settings.waitMs * 3);
    let placedAll = false;
    const placing = placeOrders(rig, LOAD_ORDERS, (i) => ({
      sku: skus[i % skus.length] as string,
      quantity: 1,
    })).finally(() => {
      placedAll = true;
    });
    let kills = 0;
    try {
      while (!placedAll || kills < MIN_KILLS) {
        await sleep(KILL_EVERY_MS);
        const before = await inboxRows(rig);
        await consumer.kill();
        kills++;
        rig.run.mark(`consumer killed (SIGKILL #${kills}) after ${before} effects`, 'fault');
        consumer = await rig.children.startConsumer(`consumer ${kills + 1}`, { concurrency: 3 });
      }
      rig.facts.kills = kills;
      rig.run.faultEnded(`the last kill (#${kills}); consumer ${kills + 1} runs on`);
      const placed = await placing;
      rig.facts.orders = placed.length;
      // the inbox, not the journal: a process killed between its COMMIT and its journal line
      // leaves an effect no line tells of (its redelivery is then absorbed as a duplicate)
      await rig.run.waitFor(
        async () => (await inboxRows(rig)) >= LOAD_ORDERS,
        `${LOAD_ORDERS} effects`,
        { intervalMs: 200 },
      );
      await rig.run.waitTwice(() => queueIdle(rig), 'the queue idle', 200);
    } finally {
      await relay.stop();
      await placing.catch(() => {});
    }
  },
  async check(rig, m) {
    const totals = await reservedTotals(rig);
    return [
      check(Number(rig.facts.kills) >= MIN_KILLS, `killed ${rig.facts.kills} times`),
      check(m.effects === LOAD_ORDERS, `${LOAD_ORDERS} orders decided (got ${m.effects})`),
      check(m.inboxRows === LOAD_ORDERS, `${LOAD_ORDERS} inbox rows (got ${m.inboxRows})`),
      totals.agree,
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) =>
    `${rig.facts.kills} SIGKILLs: ${m.deliveries} deliveries for ${LOAD_ORDERS} orders (${m.redeliveries} marked redelivered), ${m.duplicatesAbsorbed} absorbed as duplicates; unsettled deliveries came back: ${rig.configuration.unsettled}`,
};

const RELAY_WINDOW = 20;

/** The relay process dies with a publish window sent and unconfirmed. */
export const relayKilledMidWindow: Scenario = {
  id: 'relay-killed-mid-window',
  forPeers: PRODUCER_SIDE_IS_OURS,
  alone: true,
  title: 'Relay killed with a confirm window in flight',
  stimulus: `The relay runs as a process. The broker's answers to it are held (RabbitMQ: a proxy holds the confirms; SQS: the fault layer holds the SendMessageBatch responses) while ${RELAY_WINDOW} orders are placed: the messages reach the broker, the relay never learns it. The relay is SIGKILLed; a new relay process starts.`,
  invariant:
    'No loss and no double effect: the unconfirmed rows stay unpublished, the new relay sends them again, the copies that had arrived are absorbed.',
  async run(rig) {
    await rig.database.stock('SKU-RK', 1_000);
    await rig.startConsumer();
    // the fault layer holds SQS's answers; elsewhere a proxy on the relay's broker connection
    const via = rig.sqsFaults ? undefined : await rig.proxiedBroker();
    const relay = await rig.children.startRelay('relay 1', via?.child ?? {});
    rig.run.begin();
    // the relay's connection (and confirm channel) are open: one order through
    const warm = await rig.producer.placeOrder('SKU-RK', 1);
    await rig.waitSettled([warm.eventId]);
    if (via) via.proxy.holdReplies();
    else faultLayer(rig).arm({ kind: 'hold-send' });
    rig.run.mark("the broker's answers to the relay held");
    const placed = await placeOrders(rig, RELAY_WINDOW, () => ({ sku: 'SKU-RK', quantity: 1 }));
    const ids = placed.map((p) => p.eventId);
    const received = () => ids.filter((id) => rig.run.linesOf(id, 'received').length > 0).length;
    await rig.run.waitFor(() => received() > 0, 'part of the window delivered');
    const arrived = await settledCount(rig, received, 500);
    const { rows } = await rig.ordersDb.query<{ id: string }>(
      'SELECT id FROM outbox WHERE published_at IS NULL',
    );
    const unconfirmed = rows
      .map((r) => r.id)
      .filter((id) => rig.run.linesOf(id, 'received').length);
    rig.run.markUncertain(unconfirmed);
    rig.facts.arrived = arrived;
    rig.facts.uncertain = unconfirmed.length;
    await relay.kill();
    rig.run.mark(
      `relay killed (SIGKILL): ${unconfirmed.length} sent, delivered, unconfirmed`,
      'fault',
    );
    if (via) via.proxy.releaseReplies();
    else {
      faultLayer(rig).dropHeld();
      faultLayer(rig).disarm('hold-send');
    }
    await rig.children.startRelay('relay 2');
    rig.run.faultEnded('a new relay process runs');
    await rig.run.waitFor(async () => (await rig.producer.unpublished()) === 0, 'outbox drained');
    await rig.waitSettled(ids);
    // a broker that deduplicates publishes drops the new relay's copies within its window
    if (!capabilitiesOf(rig.configuration).publishDeduplication) {
      for (const id of unconfirmed) await rig.run.waitForLine(id, 'duplicate');
    }
  },
  async check(rig, m) {
    const uncertain = Number(rig.facts.uncertain);
    return [
      check(uncertain > 0, `rows sent and unconfirmed when the relay died (${uncertain})`),
      check(m.outboxUnpublished === 0, 'every row published in the end'),
      check(m.effects === RELAY_WINDOW + 1, `${RELAY_WINDOW + 1} reservations (got ${m.effects})`),
      capabilitiesOf(rig.configuration).publishDeduplication
        ? check(
            m.duplicatesAbsorbed === 0,
            `the copies dropped by the broker's deduplication, none reached the inbox (${m.duplicatesAbsorbed})`,
          )
        : check(m.duplicatesAbsorbed >= uncertain, `the copies absorbed (${m.duplicatesAbsorbed})`),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) =>
    `${rig.facts.uncertain} row(s) delivered but never confirmed to the relay; killed, it left them unpublished; the next relay sent them again: ${
      capabilitiesOf(rig.configuration).publishDeduplication
        ? 'the broker dropped the copies (same ids within its deduplication window)'
        : `${m.duplicatesAbsorbed} cop${m.duplicatesAbsorbed === 1 ? 'y' : 'ies'} absorbed`
    }, ${m.effects} reservations`,
};
