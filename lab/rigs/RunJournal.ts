import { type JournalLine, JournalRecorder } from '../../devkit/journalRecorder.js';
import { waitFor } from '../../devkit/waitFor.js';
import type { Envelope } from '../../shared/envelope/envelope.js';
import { sleep } from '../../shared/util/async.js';
import type { TimelineKind } from '../types.js';
import type { AcceptedEvent } from './types.js';

/** A mark on the run's timeline. */
export interface Mark {
  at: number;
  kind: TimelineKind;
  label: string;
}

/**
 * What one run observed: every consumer step with its time, the marks on the timeline, the
 * events the producer side accepted and those whose publish was uncertain; and the waits on them.
 */
export class RunJournal {
  readonly recorder = new JournalRecorder();
  readonly marks: Mark[] = [];
  /** When the scenario started (its setup excluded). */
  t0 = Date.now();
  /**
   * Every event the producer side accepted (the API answered 2xx, or the scenario published it as
   * the relay would), by event id: what Jepsen's accounting counts as acknowledged writes.
   */
  readonly accepted = new Map<string, AcceptedEvent>();
  /**
   * Events whose publish was uncertain at least once (the relay died or lost the answer after
   * sending them): one that arrives anyway is `recovered` in the accounting.
   */
  readonly uncertain = new Set<string>();
  /** When the scenario's fault ended (the last `faultEnded`), for the time to recover. */
  faultEndedAt: number | undefined;

  /** `waitMs`: how long a wait lasts at most unless told otherwise (the run's wait budget). */
  constructor(private readonly waitMs: number) {}

  get journal() {
    return this.recorder.journal;
  }

  /** The scenario's clock starts now (call after setup). */
  begin(): void {
    this.t0 = Date.now();
  }

  mark(label: string, kind: TimelineKind = 'control'): void {
    this.marks.push({ at: Date.now(), kind, label });
  }

  /** The fault is over (marked on the timeline): the accounting's time to recover starts here. */
  faultEnded(label: string, at = Date.now()): void {
    this.faultEndedAt = at;
    this.marks.push({ at, kind: 'control', label });
  }

  /** Records events whose publish was uncertain (see `uncertain`). */
  markUncertain(eventIds: Iterable<string>): void {
    for (const id of eventIds) this.uncertain.add(id);
  }

  /** Records an event the producer side accepted (see `accepted`). */
  accept(e: Pick<Envelope, 'id' | 'type' | 'aggregate'>): void {
    this.accepted.set(e.id, {
      eventId: e.id,
      type: e.type,
      aggregateId: e.aggregate.id,
      version: e.aggregate.version,
      at: Date.now(),
    });
  }

  /** Waits on a condition, for at most the run's wait budget. */
  waitFor<T>(
    check: () => Promise<T> | T,
    message: string,
    options: { timeoutMs?: number; intervalMs?: number } = {},
  ) {
    return waitFor(check, {
      timeoutMs: options.timeoutMs ?? this.waitMs,
      intervalMs: options.intervalMs ?? 25,
      message,
    });
  }

  /** Waits until a condition holds twice in a row, `intervalMs` apart. */
  waitTwice(check: () => Promise<boolean>, message: string, intervalMs: number) {
    let streak = 0;
    const twice = async () => {
      streak = (await check()) ? streak + 1 : 0;
      return streak >= 2;
    };
    return this.waitFor(twice, message, { intervalMs });
  }

  /**
   * Watches a condition for at most `forMs`: true as soon as it holds, false if it never did. For
   * stimuli that last a given time where one transport reacts and another does not.
   */
  async observe(check: () => Promise<boolean> | boolean, forMs: number): Promise<boolean> {
    const until = Date.now() + forMs;
    while (Date.now() < until) {
      if (await check()) return true;
      await sleep(25);
    }
    return check();
  }

  /** Journal lines of one message (optionally one step), since the scenario's start. */
  linesOf(messageId: string, step?: JournalLine['step']): JournalLine[] {
    return this.recorder.lines.filter(
      (l) => l.messageId === messageId && (!step || l.step === step) && l.at >= this.t0,
    );
  }

  waitForLine(
    messageId: string,
    step: Parameters<JournalRecorder['waitForLine']>[1],
    count = 1,
    timeoutMs = this.waitMs,
  ) {
    return this.recorder.waitForLine(messageId, step, count, timeoutMs);
  }
}
