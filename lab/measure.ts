import type { JournalLine } from '../devkit/journalRecorder.js';
import type { FaultPoint } from '../shared/config/faults.js';
import type { Rig } from './rigs/rig.js';
import type { ParkedSummary, TimelineEvent, TimelineKind } from './types.js';

/**
 * What a run did, read from the consumer's journal (every step, with its time), the run's
 * database (reservations, inbox, outbox) and the broker (the parking lot). Nothing here is
 * written by a scenario: the numbers are what the pipeline produced.
 */
export interface Measurements {
  /** Deliveries the consumer received (journal `received`). */
  deliveries: number;
  /** Of those, ones the broker marked as delivered before. */
  redeliveries: number;
  /** Effects: reservation rows in the database (a peer's: its handler's `peer_effects` rows). */
  effects: number;
  effectsByStatus: Record<string, number>;
  /** Effects committed per message id (journal `effect-committed`); more than 1 is a double effect. */
  maxEffectsPerMessage: number;
  /** Inbox rows (`processed_messages`). */
  inboxRows: number;
  /** Deliveries the inbox recognised as already processed (journal `duplicate`). */
  duplicatesAbsorbed: number;
  /** Copies the broker dropped at publish (its deduplication window): they reached no consumer. */
  droppedCopies: number;
  /** Retries scheduled (journal `retry-scheduled`) and the delay each actually took. */
  retries: number;
  retryDelaysMs: number[];
  /** Deferrals (a predecessor was missing). */
  deferrals: number;
  /**
   * Invocations that failed as a whole (the rig's `failed-invocation` marks), and worker give-ups
   * (channel closed: journal `abandoned`, worker only; see `isGiveUp`).
   */
  failedInvocations: number;
  parked: ParkedSummary[];
  /** `inventory.reservation_rejected` events written (business results). */
  rejectionEvents: number;
  outboxUnpublished: number;
  /** Outbox rows that needed more than one publish attempt. */
  outboxRetriedRows: number;
  /** Per message: the order of committed effects (message id → time). */
  committedAt: Map<string, number>;
  lines: JournalLine[];
}

/**
 * A worker's give-up (journal `abandoned`: channel closed, the broker redelivers). Behind a Lambda
 * trigger the driver journals `abandoned` on a give-back too, but there a batch given back is the
 * invocation's failure, which the rig marks already (`failed-invocation`), and a record given back
 * is reported failed in the SQS batch response (it comes back after its visibility timeout, as a
 * retry in visibility mode does): neither is a give-up of its own, so such lines are neither
 * counted nor drawn.
 */
const isGiveUp = (rig: Rig, l: JournalLine) =>
  l.step === 'abandoned' && rig.configuration.consumer === 'worker';

const isTriggerGiveBack = (rig: Rig, l: JournalLine) =>
  l.step === 'abandoned' && rig.configuration.consumer !== 'worker';

export async function measure(rig: Rig): Promise<Measurements> {
  const lines = rig.run.recorder.lines.filter((l) => l.at >= rig.run.t0);
  const by = (step: JournalLine['step']) => lines.filter((l) => l.step === step);
  const received = by('received');
  // A retry is journaled once its copy (or visibility change) is settled; a fault right after the
  // settle (reserve.after-retry-publish) stops the consumer before that line, so such a firing is a
  // retry too, of the message most recently received before it.
  const retries: { messageId: string | null; attempt: number; at: number }[] = [
    ...by('retry-scheduled'),
    ...rig.faults.fired
      .filter((f) => f.point === 'reserve.after-retry-publish' && f.at >= rig.run.t0)
      .map((f) => {
        const handled = received.filter((l) => l.at <= f.at).at(-1);
        return { messageId: handled?.messageId ?? null, attempt: handled?.attempt ?? 0, at: f.at };
      }),
  ].sort((a, b) => a.at - b.at);
  const retryDelaysMs: number[] = [];
  for (const r of retries) {
    const next = received.find(
      (l) => l.messageId === r.messageId && l.at >= r.at && l.attempt === r.attempt + 1,
    );
    if (next) retryDelaysMs.push(next.at - r.at);
  }
  const committed = by('effect-committed');
  const perMessage = new Map<string, number>();
  const committedAt = new Map<string, number>();
  for (const c of committed) {
    const id = c.messageId ?? '?';
    perMessage.set(id, (perMessage.get(id) ?? 0) + 1);
    if (!committedAt.has(id)) committedAt.set(id, c.at);
  }
  // a peer's effects are its handler's rows (peer_effects); ours, the reservations and the inbox:
  // both in the inventory service's database; the outbox is the order service's
  const effectsSql = rig.configuration.peer
    ? `SELECT (SELECT json_object_agg(outcome, n) FROM
              (SELECT outcome, count(*)::int AS n FROM peer_effects GROUP BY outcome) s) AS statuses,
            0 AS inbox, 0 AS rejections`
    : `SELECT (SELECT json_object_agg(status, n) FROM
              (SELECT status, count(*)::int AS n FROM reservations GROUP BY status) s) AS statuses,
            (SELECT count(*)::int FROM processed_messages) AS inbox,
            (SELECT count(*)::int FROM inventory_outbox
              WHERE event_type = 'inventory.reservation_rejected') AS rejections`;
  const effects = await rig.inventoryDb.query<{
    statuses: Record<string, number> | null;
    inbox: number;
    rejections: number;
  }>(effectsSql);
  const outbox = await rig.ordersDb.query<{ unpublished: number; retried: number }>(
    `SELECT (SELECT count(*)::int FROM outbox WHERE published_at IS NULL) AS unpublished,
            (SELECT count(*)::int FROM outbox WHERE attempts > 0) AS retried`,
  );
  const row =
    effects.rows[0] && outbox.rows[0] ? { ...effects.rows[0], ...outbox.rows[0] } : undefined;
  const effectsByStatus = row?.statuses ?? {};
  const parked = await rig.parked(500);
  return {
    deliveries: received.length,
    redeliveries: received.filter((l) => l.redelivered).length,
    effects: Object.values(effectsByStatus).reduce((a, n) => a + n, 0),
    effectsByStatus,
    maxEffectsPerMessage: [...perMessage.values()].reduce((a, n) => Math.max(a, n), 0),
    inboxRows: row?.inbox ?? 0,
    duplicatesAbsorbed: by('duplicate').length,
    droppedCopies: [...rig.producer.droppedCopies.values()].reduce((a, n) => a + n, 0),
    retries: retries.length,
    retryDelaysMs,
    deferrals: by('deferred').length,
    failedInvocations:
      rig.run.marks.filter((m) => m.kind === 'failed-invocation' && m.at >= rig.run.t0).length +
      lines.filter((l) => isGiveUp(rig, l)).length,
    parked,
    rejectionEvents: row?.rejections ?? 0,
    outboxUnpublished: row?.unpublished ?? 0,
    outboxRetriedRows: row?.retried ?? 0,
    committedAt,
    lines,
  };
}

const STEP_KIND: Record<JournalLine['step'], TimelineKind> = {
  received: 'received',
  duplicate: 'duplicate',
  'effect-committed': 'committed',
  deferred: 'deferred',
  'retry-scheduled': 'retry',
  parked: 'parked',
  acked: 'acked',
  abandoned: 'abandoned',
};

const short = (id: string | null | undefined) => (id ? id.slice(0, 8) : 'no id');

const FAULT_MEANING: Record<FaultPoint, string> = {
  'order.after-outbox-insert': 'order and outbox rows written, not committed',
  'relay.after-publish': 'broker confirmed, rows not marked published',
  'reserve.after-commit': 'effect committed, not acknowledged',
  'reserve.after-retry-publish': 'retry settled, original not acknowledged',
};

/** The run's events on one time axis (ms since the scenario's start), for the HTML timeline. */
export function timeline(rig: Rig, m: Measurements, finalAt: number | null): TimelineEvent[] {
  const events: TimelineEvent[] = m.lines
    .filter((l) => !isTriggerGiveBack(rig, l))
    .map((l) => ({
      t: l.at - rig.run.t0,
      kind: STEP_KIND[l.step],
      messageId: l.messageId,
      attempt: l.attempt,
      label: `${l.step} ${short(l.messageId)} (attempt ${l.attempt}${l.redelivered ? ', redelivered' : ''})${
        l.outcome ? ` ${l.outcome}` : ''
      }${l.reason ? `: ${l.reason}` : ''}`,
    }));
  for (const mark of rig.run.marks) {
    if (mark.at >= rig.run.t0)
      events.push({ t: mark.at - rig.run.t0, kind: mark.kind, label: mark.label });
  }
  for (const f of rig.faults.fired) {
    if (f.at < rig.run.t0) continue;
    events.push({
      t: f.at - rig.run.t0,
      kind: 'fault',
      label: `fault ${f.point}: ${FAULT_MEANING[f.point]}`,
    });
    if (f.point === 'reserve.after-retry-publish') {
      // the retry it interrupted (see measure): drawn like any other retry
      const handled = m.lines.filter((l) => l.step === 'received' && l.at <= f.at).at(-1);
      events.push({
        t: f.at - rig.run.t0,
        kind: 'retry',
        messageId: handled?.messageId ?? null,
        attempt: handled?.attempt ?? 0,
        label: `retry settled for ${short(handled?.messageId)}, then the fault`,
      });
    }
  }
  if (finalAt !== null)
    events.push({ t: finalAt - rig.run.t0, kind: 'final', label: 'final state' });
  return events.sort((a, b) => a.t - b.t);
}
