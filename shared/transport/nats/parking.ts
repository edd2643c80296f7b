import type { StoredMsg } from '@nats-io/jetstream';
import { matches, overRedriveLimit, pacer } from '../../consumer/parking.js';
import type {
  ParkedEntry,
  ParkingLot,
  RedriveOptions,
  RedriveResult,
  RedriveSelection,
} from '../../port/types.js';
import { NATS_HEADERS } from './constants.js';
import { copyHeaders, header, parkedEntry } from './messages.js';
import type { NatsClient } from './NatsClient.js';

export interface NatsParkingLotOptions {
  /** The parking stream and the consumer's subject in it. */
  stream: string;
  subject: string;
  /** Redrives per message allowed (`REDRIVE_LIMIT`). */
  redriveLimit: number;
  publishTimeoutMs: number;
}

/** A parked copy as stored, with its sequence in the parking stream. */
interface Parked {
  seq: number;
  stored: StoredMsg;
  entry: ParkedEntry;
}

/**
 * The parking lot of one consumer: its subject of the parking stream. Reading takes nothing out
 * (direct gets, oldest first: no consumer, no delivery counted). A redrive publishes a selected
 * copy back to the subject it was consumed from, with the same envelope id, its attempts reset
 * (a new message: delivery count 1) and its redrive counted, then deletes it from parking. Its
 * `Nats-Msg-Id` is `<id>:redrive:<count>`: the envelope id alone would fall in the duplicate
 * window of the first publish and be dropped; the count keeps a redrive published twice (a lost
 * ack) from being stored twice.
 */
export function natsParkingLot(client: NatsClient, options: NatsParkingLotOptions): ParkingLot {
  /** Up to `limit` parked copies, oldest first. */
  const scan = async (limit: number): Promise<Parked[]> => {
    const jsm = await client.jsm();
    const found: Parked[] = [];
    let seq = 0;
    while (found.length < limit) {
      const stored = await jsm.direct.getMessage(options.stream, {
        seq: seq + 1,
        next_by_subj: options.subject,
      });
      if (!stored) break;
      seq = stored.seq;
      found.push({ seq, stored, entry: parkedEntry(stored) });
    }
    return found;
  };

  const moveBack = async (p: Parked): Promise<string> => {
    const id = p.entry.diagnosis.messageId ?? '(no id)';
    const subject =
      header(p.stored.header, NATS_HEADERS.originSubject) ?? p.entry.diagnosis.origin.routingKey;
    if (!subject) throw new Error(`parked message ${id} does not say where it came from`);
    const redrive = {
      count: (p.entry.diagnosis.redriveCount ?? 0) + 1,
      lastAt: new Date().toISOString(),
    };
    const js = await client.js();
    const dedupId = p.entry.diagnosis.messageId ?? `${options.stream}-${p.seq}`;
    await js.publish(subject, p.stored.data, {
      msgID: `${dedupId}:redrive:${redrive.count}`,
      headers: copyHeaders(p.stored.header, redrive),
      timeout: options.publishTimeoutMs,
    });
    await (await client.jsm()).streams.deleteMessage(options.stream, p.seq, false);
    return id;
  };

  return {
    async list(limit = 100) {
      return (await scan(limit)).map((p) => p.entry);
    },

    async redrive(
      selection: RedriveSelection,
      redriveOptions: RedriveOptions = {},
    ): Promise<RedriveResult> {
      const parked = await scan(Number.POSITIVE_INFINITY);
      const result: RedriveResult = {
        scanned: parked.length,
        matched: 0,
        moved: [],
        dryRun: redriveOptions.dryRun ?? false,
        skipped: [],
      };
      const pace = pacer(redriveOptions.rate);
      for (const p of parked) {
        if (!matches(p.entry, selection)) continue;
        result.matched++;
        const skip = overRedriveLimit(p.entry, options.redriveLimit, redriveOptions);
        if (skip) {
          result.skipped.push(skip); // stays parked, its diagnosis untouched
          continue;
        }
        if (redriveOptions.dryRun) continue;
        await pace();
        const id = await moveBack(p);
        result.moved.push(id);
        redriveOptions.onMoved?.(id);
      }
      return result;
    },
  };
}
