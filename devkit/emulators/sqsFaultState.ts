import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { getOrSet } from '../maps.js';
import type { SqsFault, SqsFaultEvent, SqsFaultKind, SqsThrottleError } from './sqsFaults.js';
import {
  eventIdOf,
  queueKey,
  type Reply,
  relay,
  type SqsMessage,
  Upstream,
} from './sqsFaultWire.js';

/** What the SQS fault layer keeps between calls, shared by the operations it acts on. */
export interface LayerState {
  readonly upstream: Upstream;
  readonly faults: ArmedFaults;
  readonly log: FaultLog;
  readonly handles: ReceiptHandles;
  readonly duplicates: Duplicates;
  /** `reorder`: single messages held back from an answer, per queue. */
  readonly held: PerQueue<HeldMessage>;
  readonly heldSends: HeldSends;
  readonly random: () => number;
}

export function newLayerState(upstream: string, random: () => number): LayerState {
  return {
    upstream: new Upstream(upstream),
    faults: new ArmedFaults(),
    log: new FaultLog(),
    handles: new ReceiptHandles(),
    duplicates: new Duplicates(),
    held: new PerQueue<HeldMessage>(),
    heldSends: new HeldSends(),
    random,
  };
}

/** The behaviours that count their actions (the others last a while or until disarmed). */
type CountedKind = Exclude<SqsFaultKind, 'throttle' | 'hold-send'>;

type Armed = { [K in SqsFaultKind]?: Extract<SqsFault, { kind: K }> & { left: number } } & {
  throttle?: { until: number };
};

/** The behaviours armed now, with how many actions each has left. */
export class ArmedFaults {
  private armed: Armed = {};

  /** Arms a behaviour (replacing one of its kind); throws on settings out of range. */
  arm(fault: SqsFault): void {
    switch (fault.kind) {
      case 'throttle':
        if (!(fault.forMs > 0)) throw new RangeError('throttle: forMs must be > 0');
        this.armed.throttle = { ...fault, left: 0, until: Date.now() + fault.forMs };
        return;
      case 'hold-send':
        this.armed['hold-send'] = { ...fault, left: 0 };
        return;
      default: {
        const left = fault.count ?? 1;
        if (!Number.isInteger(left) || left < 1) {
          throw new RangeError(`${fault.kind}: count must be a positive integer`);
        }
        if (fault.kind === 'reorder' && fault.holdMs !== undefined && !(fault.holdMs >= 0)) {
          throw new RangeError('reorder: holdMs must be >= 0');
        }
        (this.armed as Record<string, unknown>)[fault.kind] = { ...fault, left };
      }
    }
  }

  disarm(kind?: SqsFaultKind): void {
    const kinds = kind ? [kind] : (Object.keys(this.armed) as SqsFaultKind[]);
    for (const k of kinds) delete this.armed[k];
  }

  isArmed(kind: SqsFaultKind): boolean {
    return this.armed[kind] !== undefined;
  }

  /** Takes one action of a counted behaviour if it is armed; it disarms itself at zero. */
  take<K extends CountedKind>(kind: K) {
    const fault = this.armed[kind];
    if (!fault) return undefined;
    fault.left -= 1;
    if (fault.left <= 0) delete this.armed[kind];
    return fault;
  }

  /** The error a throttled operation is answered with; a throttle past its time disarms. */
  throttled(op: string): SqsThrottleError | undefined {
    const t = this.armed.throttle;
    if (!t) return undefined;
    if (Date.now() >= t.until) {
      delete this.armed.throttle;
      return undefined;
    }
    if (t.operations && !t.operations.includes(op)) return undefined;
    return t.error ?? 'ThrottlingException';
  }
}

/** The messages an action concerned: their SQS MessageIds and our envelopes' ids. */
export interface Concerned {
  messageIds: string[];
  eventIds: (string | undefined)[];
}

export function concernedOf(messages: SqsMessage[]): Concerned {
  return {
    messageIds: messages.map((m) => m.MessageId ?? ''),
    eventIds: messages.map((m) => eventIdOf(m.Body)),
  };
}

/** What the layer did, in order. */
export class FaultLog {
  readonly events: SqsFaultEvent[] = [];

  record(kind: SqsFaultKind, detail: string, { messageIds, eventIds }: Concerned): void {
    this.events.push({
      at: Date.now(),
      kind,
      detail,
      messageIds,
      eventIds: eventIds.filter((id): id is string => id !== undefined),
    });
  }

  count(kind: SqsFaultKind): number {
    return this.events.filter((e) => e.kind === kind).length;
  }
}

const REMEMBERED_HANDLES = 20_000;

/** Receipt handle → the message it was issued for (every receive answer is read). */
export class ReceiptHandles {
  private readonly known = new Map<string, { messageId: string; eventId?: string | undefined }>();

  remember(m: SqsMessage): void {
    if (!m.ReceiptHandle || !m.MessageId) return;
    this.known.set(m.ReceiptHandle, { messageId: m.MessageId, eventId: eventIdOf(m.Body) });
    if (this.known.size > REMEMBERED_HANDLES) {
      const oldest = this.known.keys().next().value;
      if (oldest !== undefined) this.known.delete(oldest);
    }
  }

  messagesOf(receiptHandles: (string | undefined)[]): Concerned {
    const known = receiptHandles
      .map((h) => (h ? this.known.get(h) : undefined))
      .filter((m) => m !== undefined);
    return { messageIds: known.map((m) => m.messageId), eventIds: known.map((m) => m.eventId) };
  }
}

/** Lists kept per queue (by its path), created on first use. */
export class PerQueue<T> {
  private readonly lists = new Map<string, T[]>();

  of(queueUrl: string): T[] {
    return getOrSet(this.lists, queueKey(queueUrl), () => []);
  }

  clear(): void {
    for (const list of this.lists.values()) list.length = 0;
  }
}

/** `reorder`: a message held back, and for how long at most. */
export interface HeldMessage {
  message: SqsMessage;
  since: number;
  holdMs: number;
}

/** The two receipt handles of a duplicated message: either settles it. */
export interface Copy {
  messageId: string;
  original: string;
  deleted: boolean;
}

/** `duplicate`: the copies waiting for the next receive, and the handle pairs of the copied. */
export class Duplicates {
  /** Copies (new receipt handles) waiting for the next receive, per queue. */
  readonly waiting = new PerQueue<SqsMessage>();
  /** Receipt handle (either copy's) → the duplicated message. */
  private readonly pairs = new Map<string, Copy>();

  /** A second copy of `m` under a new receipt handle, received once more; none without a handle. */
  copyOf(m: SqsMessage): SqsMessage | undefined {
    if (!m.ReceiptHandle || !m.MessageId) return undefined;
    const handle = `${randomUUID()}-fault-copy`;
    const pair: Copy = { messageId: m.MessageId, original: m.ReceiptHandle, deleted: false };
    this.pairs.set(m.ReceiptHandle, pair);
    this.pairs.set(handle, pair);
    const copy: SqsMessage = { ...m, ReceiptHandle: handle };
    const receiveCount = m.Attributes?.ApproximateReceiveCount;
    if (m.Attributes && receiveCount !== undefined) {
      copy.Attributes = {
        ...m.Attributes,
        ApproximateReceiveCount: String(Number(receiveCount) + 1),
      };
    }
    return copy;
  }

  pairOf(receiptHandle: string | undefined): Copy | undefined {
    return this.pairs.get(receiptHandle ?? '');
  }

  /** The handle SQS issued for the message a copy's handle stands for. */
  originalOf(receiptHandle: unknown): string | undefined {
    return typeof receiptHandle === 'string' ? this.pairs.get(receiptHandle)?.original : undefined;
  }
}

/** `hold-send`: send answers held back from their clients. */
export class HeldSends {
  private readonly held: { res: ServerResponse; reply: Reply }[] = [];

  hold(res: ServerResponse, reply: Reply): void {
    this.held.push({ res, reply });
  }

  /** Answers every held response now. */
  async release(): Promise<void> {
    const held = this.held.splice(0);
    await Promise.all(held.map(({ res, reply }) => relay(res, reply)));
  }

  /** Destroys the held connections unanswered. */
  drop(): void {
    for (const { res } of this.held.splice(0)) res.socket?.destroy();
  }
}
