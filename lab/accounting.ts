import type { JournalLine } from '../devkit/journalRecorder.js';
import { INVENTORY_CONSUMER } from '../shared/inventory/ReserveInventory.js';
import type { Measurements } from './measure.js';
import type { Rig } from './rigs/index.js';
import type { AcceptedEvent } from './rigs/types.js';
import type { Accounting } from './types.js';

/** The accounting of a run that did not run (not applicable) or could not be measured. */
export const NO_ACCOUNTING: Accounting = {
  accepted: 0,
  decided: 0,
  lost: 0,
  duplicated: 0,
  recovered: 0,
  unexpected: 0,
  orderViolations: 0,
  recoverMs: null,
};

/** An event the database holds a decision for. */
export interface StoredDecision {
  eventId: string;
  /**
   * Effects the database holds for it: a peer's `peer_effects` rows; 0 for ours (the inbox row is
   * the claim, one per event by its key: the journal counts our effects).
   */
  effects: number;
  /** When its first effect committed by the database's clock (`peer_effects.committed_at`), if known. */
  at: number | null;
}

/** What the accounting reads, already extracted from the rig (see `accountRun`). */
export interface AccountingFacts {
  accepted: Iterable<Pick<AcceptedEvent, 'eventId' | 'aggregateId' | 'version'>>;
  uncertain: Iterable<string>;
  /** The run's journal lines (in the order they were recorded). */
  lines: readonly Pick<JournalLine, 'step' | 'messageId' | 'at'>[];
  /** Ours: the inbox rows (`processed_messages`); a peer's: its `peer_effects` rows, per event. */
  stored: readonly StoredDecision[];
  /** Message ids in the parking lot (a peer's dead-letter queue) at the end. */
  parked: readonly (string | null)[];
  faultEndedAt?: number | undefined;
}

/** The accounting rules, on plain facts (tested on synthetic ones). */
export function account(facts: AccountingFacts): Accounting {
  const accepted = new Map<string, Pick<AcceptedEvent, 'eventId' | 'aggregateId' | 'version'>>();
  for (const a of facts.accepted) accepted.set(a.eventId, a);
  const uncertain = new Set(facts.uncertain);

  // journal: effects per event, its first effect (in recorded order), its last park
  const lines = [...facts.lines].sort((a, b) => a.at - b.at); // stable: ties keep recorded order
  const commits = new Map<string, number>();
  const firstCommit = new Map<string, number>();
  const lastPark = new Map<string, number>();
  const commitOrder: string[] = [];
  for (const l of lines) {
    if (!l.messageId) continue;
    if (l.step === 'effect-committed') {
      commits.set(l.messageId, (commits.get(l.messageId) ?? 0) + 1);
      if (!firstCommit.has(l.messageId)) {
        firstCommit.set(l.messageId, l.at);
        commitOrder.push(l.messageId);
      }
    } else if (l.step === 'parked') {
      // a park that did not take (the parking lot unreachable) is journaled too: the last one stuck
      lastPark.set(l.messageId, l.at);
    }
  }

  const stored = new Map<string, { effects: number; at: number | null }>();
  for (const s of facts.stored) {
    const seen = stored.get(s.eventId);
    const at = seen?.at == null ? s.at : s.at === null ? seen.at : Math.min(seen.at, s.at);
    stored.set(s.eventId, { effects: (seen?.effects ?? 0) + s.effects, at });
  }
  const parked = new Set(facts.parked.filter((id): id is string => id !== null));

  let decided = 0;
  let recovered = 0;
  let last: number | null = null;
  for (const id of accepted.keys()) {
    if (!stored.has(id) && !parked.has(id)) continue;
    decided++;
    if (uncertain.has(id)) recovered++;
    // decided when its effect committed (a parked event redriven and applied: when applied),
    // else when it was parked
    const journaled = firstCommit.get(id);
    const inDb = stored.get(id)?.at ?? null;
    const effectAt =
      journaled === undefined ? inDb : inDb === null ? journaled : Math.min(journaled, inDb);
    const at = effectAt ?? lastPark.get(id) ?? null;
    if (at !== null && (last === null || at > last)) last = at;
  }

  let duplicated = 0;
  for (const id of new Set([...commits.keys(), ...stored.keys()])) {
    const n = Math.max(commits.get(id) ?? 0, stored.get(id)?.effects ?? 0);
    if (n > 1) duplicated += n - 1;
  }

  let unexpected = 0;
  for (const id of stored.keys()) if (!accepted.has(id)) unexpected++;

  // per ordering key, in the order the effects were first committed: an event applied after a
  // higher version of its key is out of order
  let orderViolations = 0;
  const highest = new Map<string, number>();
  for (const id of commitOrder) {
    const a = accepted.get(id);
    if (!a) continue;
    const top = highest.get(a.aggregateId);
    if (top !== undefined && a.version < top) orderViolations++;
    else highest.set(a.aggregateId, a.version);
  }

  return {
    accepted: accepted.size,
    decided,
    lost: accepted.size - decided,
    duplicated,
    recovered,
    unexpected,
    orderViolations,
    recoverMs:
      facts.faultEndedAt === undefined || last === null
        ? null
        : Math.max(0, last - facts.faultEndedAt),
  };
}

/**
 * The accounting of a run, after its scenario and its measurements: the rig's accepted and
 * uncertain events and its fault end, the journal, the parking lot (from the measurements) and
 * the database (ours: the inbox; a peer: its effect rows).
 */
export async function accountRun(rig: Rig, m: Measurements): Promise<Accounting> {
  const stored: StoredDecision[] = rig.configuration.peer
    ? (
        await rig.inventoryDb.query<{ event_id: string; n: number; at: number | null }>(
          `SELECT event_id::text AS event_id, count(*)::int AS n,
                  (extract(epoch FROM min(committed_at)) * 1000)::float8 AS at
             FROM peer_effects GROUP BY event_id`,
        )
      ).rows.map((r) => ({ eventId: r.event_id, effects: r.n, at: r.at }))
    : (
        await rig.inventoryDb.query<{ message_id: string }>(
          'SELECT message_id::text AS message_id FROM processed_messages WHERE consumer_name = $1',
          [INVENTORY_CONSUMER],
        )
      ).rows.map((r) => ({ eventId: r.message_id, effects: 0, at: null }));
  return account({
    accepted: rig.run.accepted.values(),
    uncertain: rig.run.uncertain,
    lines: m.lines,
    stored,
    parked: m.parked.map((p) => p.messageId),
    faultEndedAt: rig.run.faultEndedAt,
  });
}
