import { AsyncLocalStorage } from 'node:async_hooks';
import { shortError } from '../../consumer/classify.js';
import type { DeliveryJournal, InboundMessage, MessageHandler, Outcome } from '../../port/types.js';

/** One thing that happened to a message (or to the run, `id: null`), as the kit saw it. */
export interface Observation {
  /** Epoch ms. */
  at: number;
  /** The message id in lower case; null for marks of the run (a kill, an outage's end). */
  id: string | null;
  step: string;
  detail?: string | undefined;
  /** `outcome`: the outcome's kind; journal lines: the driver's outcome label. */
  kind?: string | undefined;
  /** Which consumer process (`child 1`, …), when not this one. */
  process?: string | undefined;
}

export interface Recorder {
  record(o: Omit<Observation, 'at'> & { at?: number }): void;
}

/** A message's id as the kit keys it (lower case, as the inbox returns it), or null. */
export const idOf = (m: Pick<InboundMessage, 'messageId'> | undefined): string | null =>
  m?.messageId ? m.messageId.toLowerCase() : null;

/** The messages of the batch the handler is working on: what the database faults aim at. */
export const currentBatch = new AsyncLocalStorage<readonly InboundMessage[]>();

/** What stands in for the body of a message the kit makes unreadable (not JSON). */
export const UNREADABLE_BODY = Buffer.from('{"this is not": json', 'utf8');

export interface Instrumentation {
  recorder: Recorder;
  /** Message ids whose body the handler gets unreadable (the poison scenario). */
  corrupt?: ReadonlySet<string> | undefined;
  /**
   * Asked after the handler returned: a reason gives the whole batch back (the kit throws, so the
   * driver discards the outcomes and the broker delivers the batch again).
   */
  giveBack?: ((ids: readonly (string | null)[]) => string | undefined) | undefined;
  /** Awaited after the handler returned and before the driver settles (a crash window). */
  afterHandler?: (() => Promise<void>) | undefined;
  /**
   * Awaited before the handler runs, with the batch's ids (slow processing): a returned reason is
   * recorded on each message.
   */
  beforeHandler?: ((ids: readonly (string | null)[]) => Promise<string | undefined>) | undefined;
}

/** One line for an outcome. */
export function describeOutcome(o: Outcome): string {
  if (o.kind === 'ack') return `ack (${o.result})`;
  if (o.kind === 'retry') {
    return `retry in ${o.delayMs} ms as attempt ${o.attempt} (${o.errorClass}: ${o.error})`;
  }
  return `park ${o.reason} (${o.errorClass}: ${o.error})`;
}

/**
 * The subject's handler as the kit runs it: every delivery and every outcome recorded, the batch
 * known to the database faults, and the kit's own faults around it (an unreadable body on the way
 * in, a give-back or a pause on the way out).
 */
export function instrument(handler: MessageHandler, i: Instrumentation): MessageHandler {
  return async (messages) => {
    for (const m of messages) {
      i.recorder.record({
        id: idOf(m),
        step: 'delivered',
        detail: `attempt ${m.attempt}${m.redelivered ? ', redelivered' : ''}${m.redrive ? `, redriven ${m.redrive.count}×` : ''} (batch of ${messages.length})`,
      });
    }
    const seen = i.corrupt
      ? messages.map((m) => {
          const id = idOf(m);
          return id && i.corrupt?.has(id) ? { ...m, body: UNREADABLE_BODY } : m;
        })
      : messages;
    const slow = await i.beforeHandler?.(messages.map(idOf));
    if (slow) {
      for (const m of messages) i.recorder.record({ id: idOf(m), step: 'slowed', detail: slow });
    }
    let outcomes: Outcome[];
    try {
      outcomes = await currentBatch.run(messages, () => handler(seen));
    } catch (err) {
      for (const m of messages) {
        i.recorder.record({ id: idOf(m), step: 'outcome', kind: 'threw', detail: shortError(err) });
      }
      throw err;
    }
    outcomes.forEach((o, k) => {
      i.recorder.record({
        id: idOf(messages[k]),
        step: 'outcome',
        kind: o.kind,
        detail: describeOutcome(o),
      });
    });
    const reason = i.giveBack?.(messages.map(idOf));
    if (reason) {
      for (const m of messages)
        i.recorder.record({ id: idOf(m), step: 'given-back', detail: reason });
      throw new Error(`the conformance kit gives the batch back: ${reason}`);
    }
    await i.afterHandler?.();
    return outcomes;
  };
}

/** The driver's journal lines into the recorder. */
export function journalInto(recorder: Recorder, process?: string): DeliveryJournal {
  return {
    recordMessage(step, message, outcome, reason) {
      recorder.record({
        id: idOf(message),
        step,
        kind: outcome,
        detail: [outcome, reason].filter(Boolean).join(': ') || undefined,
        process,
      });
    },
  };
}

/** Everything the kit saw in one scenario, and the counts its conditions read. */
export class Observer implements Recorder {
  readonly started = Date.now();
  readonly observations: Observation[] = [];
  private readonly byId = new Map<string, Observation[]>();

  record(o: Omit<Observation, 'at'> & { at?: number }): void {
    const observation = { ...o, at: o.at ?? Date.now() };
    this.observations.push(observation);
    if (observation.id === null) return;
    const list = this.byId.get(observation.id);
    if (list) list.push(observation);
    else this.byId.set(observation.id, [observation]);
  }

  mark(detail: string): void {
    this.record({ id: null, step: 'mark', detail });
  }

  /** A message's observations, in the order they were recorded. */
  of(id: string): readonly Observation[] {
    return this.byId.get(id) ?? [];
  }

  count(id: string, step: string, kind?: (k: string | undefined) => boolean): number {
    let n = 0;
    for (const o of this.of(id)) if (o.step === step && (!kind || kind(o.kind))) n++;
    return n;
  }

  /** Deliveries settled for good: acknowledged, not as a retry copy (a park's ack counts). */
  settled(id: string): number {
    return this.count(id, 'acked', (k) => k !== 'retry');
  }

  /** Deliveries the handler saw. */
  deliveries(id: string): number {
    return this.count(id, 'delivered');
  }

  /** The message's last delivery was settled for good (none yet: false). */
  lastDeliverySettled(id: string): boolean {
    let delivered = -1;
    let settled = -1;
    this.of(id).forEach((o, i) => {
      if (o.step === 'delivered') delivered = i;
      if (o.step === 'acked' && o.kind !== 'retry') settled = i;
    });
    return settled > delivered;
  }

  /** The reason of each park confirmed by the consumer (the journal's `parked` lines). */
  parks(id: string): string[] {
    return this.of(id)
      .filter((o) => o.step === 'parked')
      .map((o) => o.kind ?? '');
  }
}
