import { randomUUID } from 'node:crypto';
import { encodeEnvelope, newEnvelope } from '../../shared/envelope/envelope.js';
import type { Scenario } from '../scenario.js';
import { check } from '../types.js';
import { noDoubleEffect, parkedLine, startWithStock } from './common.js';

const poisonMessages = () => {
  const orderId = randomUUID();
  const valid = newEnvelope({
    type: 'order.created',
    aggregate: { type: 'order', id: orderId, version: 1 },
    data: { orderId, sku: 'SKU-P', quantity: 1 },
    correlationId: 'lab-poison',
    producer: 'order-service',
  });
  const { aggregate: _a, occurred_at: _o, ...missingFields } = { ...valid, id: randomUUID() };
  const future = { ...valid, id: randomUUID(), schema_version: '9.0' };
  return [
    { kind: 'invalid JSON', body: '{"id": "not json', messageId: randomUUID() },
    {
      kind: 'envelope missing fields',
      body: JSON.stringify(missingFields),
      messageId: missingFields.id,
    },
    {
      kind: 'unknown major version',
      body: encodeEnvelope(future).toString(),
      messageId: future.id,
      schemaVersion: '9.0',
    },
  ].map((m) => ({ ...m, type: 'order.created' }));
};

/** Three kinds of messages that can never be processed. */
export const poison: Scenario = {
  id: 'poison',
  title: 'Poison messages (invalid JSON, missing fields, unknown major version)',
  stimulus:
    'Three messages the consumer can never process: a body that is not JSON, an envelope without aggregate and occurred_at, and schema_version 9.0.',
  invariant:
    'Each is parked on its first delivery with a diagnosis (reason permanent), never retried, no effect.',
  async run(rig) {
    await rig.startConsumer();
    rig.run.begin();
    const messages = poisonMessages();
    rig.facts.ids = messages.map((m) => m.messageId);
    rig.facts.kinds = messages.map((m) => m.kind);
    await rig.producer.publishRaw(messages);
    if (await rig.peerSettled(rig.facts.ids as string[])) return;
    for (const m of messages) await rig.run.waitForLine(m.messageId, 'parked');
    await rig.run.waitFor(
      async () => (await rig.parked(10)).length >= messages.length,
      'three in the parking lot',
      { intervalMs: 200 },
    );
  },
  check(rig, m) {
    const ids = rig.facts.ids as string[];
    const kinds = rig.facts.kinds as string[];
    if (rig.configuration.peer) {
      // the same invariant, read from what a peer leaves: its DLQ and the handler's calls
      return [
        ...ids.map((id, i) => {
          const p = m.parked.filter((x) => x.messageId === id);
          const calls = rig.run.linesOf(id, 'received').length;
          return check(
            p.length === 1 && p[0]?.errorClass !== 'none recorded' && calls <= 1,
            `${kinds[i]}: parked once with a diagnosis, on its first delivery (${p.length ? `in ${p[0]?.via} after ${calls} deliveries, ${p[0]?.error}` : `not parked, ${calls} deliveries`})`,
          );
        }),
        check(m.effects === 0, `no effect (got ${m.effects})`),
      ];
    }
    return [
      ...ids.map((id, i) => {
        const p = m.parked.filter((x) => x.messageId === id);
        return check(
          p.length === 1 && p[0]?.reason === 'permanent' && p[0]?.attempts === 0,
          `${kinds[i]}: parked once as permanent, on its first attempt (${p.map((x) => `${x.reason} after ${x.attempts} retries: ${x.error}`).join('; ') || 'not parked'})`,
        );
      }),
      check(m.retries === 0, `never retried (got ${m.retries})`),
      check(m.effects === 0, `no effect (got ${m.effects})`),
    ];
  },
  note: (rig, m) =>
    rig.configuration.peer
      ? `${m.deliveries} deliveries of 3 messages, each failed delivery: ${rig.configuration.unsettled} → ${m.parked.length} in ${m.parked[0]?.via ?? 'its DLQ'}, with no diagnosis`
      : `${parkedLine(m)} on first delivery, 0 retries; errors: ${m.parked
          .map((p) => p.error.replace(/^\w+Error: /, '').slice(0, 48))
          .join(' | ')}`,
};

/** The parking lot cannot take a message when one must be parked. */
export const parkingUnavailable: Scenario = {
  id: 'parking-unavailable',
  forPeers: {
    reason:
      "it removes our parking lot's route; a peer's dead-letter queue is the broker's redrive",
    instead: 'see poison and db-outage-long for where a peer puts what it cannot process',
  },
  title: 'Parking lot unavailable',
  stimulus:
    'The parking route is removed (RabbitMQ: parking queue unbound; SQS: parking queue deleted), a poison message arrives, then the route comes back.',
  invariant: 'The poison message is never lost: it ends in the parking lot exactly once.',
  async run(rig) {
    await rig.startConsumer();
    rig.run.begin();
    await rig.breakParking();
    rig.run.mark('parking route removed');
    const id = randomUUID();
    rig.facts.id = id;
    await rig.producer.publishRaw([{ body: '{not json', messageId: id, type: 'order.created' }]);
    // Wait until the consumer has met the missing parking lot and the message was kept somewhere.
    await rig.run.waitFor(
      () =>
        rig.run.marks.filter((x) => x.kind === 'failed-invocation').length >= 2 ||
        rig.run.linesOf(id, 'parked').some((l) => l.outcome === 'dead-lettered by the broker') ||
        rig.run.linesOf(id, 'received').length >= 2,
      'the park attempt failed and the message was kept',
    );
    rig.facts.held = await rig.heldForDeadLettering();
    await rig.restoreParking();
    rig.run.faultEnded('parking route back');
    await rig.run.waitFor(
      async () =>
        (await rig.backend.parkingLot().list(10)).some((p) => p.diagnosis.messageId === id),
      'parked at last',
      { intervalMs: 200 },
    );
  },
  check(rig, m) {
    const parked = m.parked.filter((p) => p.messageId === rig.facts.id);
    return [
      check(parked.length === 1, `parked exactly once (got ${parked.length})`),
      check(m.effects === 0, `no effect (got ${m.effects})`),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) => {
    const id = String(rig.facts.id);
    const refused = rig.run
      .linesOf(id, 'parked')
      .map((l) => l.outcome)
      .filter((o) => o !== 'permanent');
    const failed = m.failedInvocations;
    const how =
      refused[0] === 'dead-lettered by the broker'
        ? 'park copy returned (NO_ROUTE) → nack(requeue=false): at-least-once dead lettering held it in inventory.orders'
        : failed > 0
          ? `park copy refused → the invocation failed ${failed}× and the batch was requeued`
          : `park send failed → reported failed, back after the visibility timeout (${m.deliveries} deliveries)`;
    return `${how}; ${parkedLine(m)} once the route was back`;
  },
};

const REDRIVEN = 5;

/** Messages parked because of a bug, redriven after the fix. */
export const redriveAfterFix: Scenario = {
  id: 'redrive-after-fix',
  forPeers: {
    reason: 'it drives our parking lot tooling (parked with a diagnosis, redriven by error class)',
    instead:
      "a peer's DLQ is redriven by the broker's own tools (SQS StartMessageMoveTask, a shovel), with no diagnosis to select by",
  },
  title: 'Redrive after the fix',
  stimulus: `Reservation writes fail (SQLSTATE 40001) and the budget allows no retry, so ${REDRIVEN} orders are parked; the failure is fixed, then the parking lot is redriven at 20 messages/s.`,
  invariant:
    'After the redrive each order is reserved exactly once, with its original event id; the parking lot is empty.',
  rig: { budget: { maxAttempts: 0 } },
  async run(rig) {
    await startWithStock(rig, 'SKU-X', 100);
    await rig.database.failures.fail();
    rig.run.mark('reservation writes fail');
    const ids: string[] = [];
    for (let i = 0; i < REDRIVEN; i++)
      ids.push((await rig.producer.placeOrder('SKU-X', 1)).eventId);
    rig.facts.ids = ids;
    await rig.producer.drainOutbox();
    // Every order parked and every delivery settled, counted without reading the parking lot
    // (a read gives messages back asynchronously: a redrive right after one could miss a copy).
    // An Amazon MQ invocation that timed out gives its batch back and parks it again: those
    // copies must be parked before the fix, or one could be parked after the redrive.
    const settled = () => {
      const steps = rig.run.recorder.lines.filter((l) => l.at >= rig.run.t0).map((l) => l.step);
      const n = (step: string) => steps.filter((s) => s === step).length;
      return n('received') > 0 && n('received') === n('acked') + n('abandoned');
    };
    await rig.run.waitFor(
      async () => settled() && (await rig.backend.inspect()).parked >= REDRIVEN,
      `${REDRIVEN} parked and every delivery settled`,
      { intervalMs: 200 },
    );
    await rig.database.failures.clear();
    rig.run.faultEnded('the fix: writes succeed again');
    // One redrive, as an operator runs it: it must move every parked order.
    const { moved: movedIds } = await rig.backend
      .parkingLot()
      .redrive({ errorClasses: ['transient'] }, { rate: 20 });
    // A batch whose invocation timed out after parking is given back and parked again: parking
    // then holds two copies of one order (same id), and the redrive moves both; the inbox applies
    // one. What must hold is that every parked order was moved.
    const moved = new Set(movedIds).size;
    rig.facts.moved = moved;
    rig.facts.copies = movedIds.length;
    rig.run.mark(`redrive moved ${movedIds.length} (${moved} orders)`);
    for (const id of ids) await rig.run.waitForLine(id, 'effect-committed');
    await rig.run.waitFor(
      async () => (await rig.backend.parkingLot().list(50)).length === 0,
      'parking empty',
      { intervalMs: 200 },
    );
  },
  check(rig, m) {
    const ids = rig.facts.ids as string[];
    return [
      check(rig.facts.moved === REDRIVEN, `${REDRIVEN} orders redriven (moved ${rig.facts.moved})`),
      check(m.effects === REDRIVEN, `${REDRIVEN} reservations (got ${m.effects})`),
      check(
        ids.every((id) => m.committedAt.has(id)),
        'each reserved by its original event id',
      ),
      check(m.parked.length === 0, `parking lot empty (got ${m.parked.length})`),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig, m) =>
    `${REDRIVEN} parked (exhausted/transient, no retry allowed) → fix → ${rig.facts.moved} redriven at 20/s${
      (rig.facts.copies as number) > (rig.facts.moved as number)
        ? ` (${rig.facts.copies} copies: an invocation timed out after parking, its batch was parked again)`
        : ''
    } (${rig.redriveMechanism}) → ${m.effects} reserved once`,
};
