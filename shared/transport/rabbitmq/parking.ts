import type { GetMessage } from 'amqplib';
import type { Diagnosis, ParkReason } from '../../consumer/types.js';
import { sleep } from '../../util/async.js';
import type { RabbitConnection } from './RabbitConnection.js';
import {
  HEADERS,
  headerString,
  type RabbitSettler,
  type RawMessage,
  rawFromAmqp,
} from './RabbitSettler.js';
import { RETRY_NAMES } from './topology.js';

/**
 * Parking lot operations on RabbitMQ: read the diagnoses, and move selected messages back to
 * `inventory.orders` (through `inventory.orders.requeue`, so no other queue gets a copy). Never
 * automatic: an operator runs it after fixing the cause.
 *
 * Reading uses basic.get without acking, then closes the channel: unacked messages return to the
 * queue. (On RabbitMQ 4 a return by channel close does not count towards a delivery limit; the
 * parking queue has no delivery limit or dead-letter target of ours on 3.x.)
 */
export interface ParkedMessage {
  diagnosis: Diagnosis;
  /** How it got here: parked by the consumer (with diagnosis) or dead-lettered by the broker. */
  via: 'consumer' | 'broker';
  raw: RawMessage;
}

interface XDeath {
  reason?: string;
  queue?: string;
  time?: { value?: number } | number;
  count?: number;
}

export function parkedFromRaw(raw: RawMessage): ParkedMessage {
  const h = raw.properties.headers;
  const parkedAt = headerString(h, HEADERS.parkedAt);
  if (parkedAt) {
    return {
      via: 'consumer',
      raw,
      diagnosis: {
        messageId: raw.properties.messageId ?? null,
        type: raw.properties.type ?? null,
        schemaVersion: headerString(h, HEADERS.schemaVersion) ?? null,
        attempts: Number(headerString(h, HEADERS.attempt) ?? 0),
        firstFailureAt: headerString(h, HEADERS.firstFailureAt) ?? parkedAt,
        parkedAt,
        reason: (headerString(h, HEADERS.parkReason) ?? 'permanent') as ParkReason,
        errorClass: headerString(h, HEADERS.errorClass) ?? 'unknown',
        error: headerString(h, HEADERS.lastError) ?? '',
        correlationId: raw.properties.correlationId ?? null,
        consumer: headerString(h, HEADERS.consumer) ?? 'unknown',
      },
    };
  }
  // Dead-lettered by the broker (nack without requeue, delivery limit): x-death says why.
  const death = (Array.isArray(h['x-death']) ? (h['x-death'][0] as XDeath) : undefined) ?? {};
  const t = typeof death.time === 'number' ? death.time : death.time?.value;
  const at = t ? new Date(t * 1000).toISOString() : new Date(0).toISOString();
  return {
    via: 'broker',
    raw,
    diagnosis: {
      messageId: raw.properties.messageId ?? null,
      type: raw.properties.type ?? null,
      schemaVersion: headerString(h, HEADERS.schemaVersion) ?? null,
      attempts: Number(headerString(h, HEADERS.attempt) ?? 0),
      firstFailureAt: headerString(h, HEADERS.firstFailureAt) ?? at,
      parkedAt: at,
      reason: 'exhausted',
      errorClass: `broker:${death.reason ?? 'unknown'}`,
      error: `dead-lettered by the broker from ${death.queue ?? '?'} (${death.reason ?? '?'}, ${death.count ?? 1}×)`,
      correlationId: raw.properties.correlationId ?? null,
      consumer: 'broker',
    },
  };
}

/** Reads up to `limit` parked messages without removing them. */
export async function listParked(
  connection: RabbitConnection,
  limit = 100,
): Promise<ParkedMessage[]> {
  return connection.withChannel(async (ch) => {
    const { messageCount } = await ch.checkQueue(RETRY_NAMES.parkingQueue);
    const out: ParkedMessage[] = [];
    for (let i = 0; i < Math.min(limit, messageCount); i++) {
      const msg = await ch.get(RETRY_NAMES.parkingQueue, { noAck: false });
      if (!msg) break;
      out.push(parkedFromRaw(rawFromAmqp(msg)));
    }
    return out; // the channel closes: every message read goes back to the queue
  });
}

export interface RedriveSelection {
  types?: string[];
  /** Matches the diagnosis' error class or park reason (`transient`, `permanent`, `exhausted`, …). */
  errorClasses?: string[];
  /** Parked at or after / before. */
  since?: Date;
  until?: Date;
  ids?: string[];
}

export function matches(p: ParkedMessage, s: RedriveSelection): boolean {
  const d = p.diagnosis;
  if (s.types?.length && !s.types.includes(d.type ?? '')) return false;
  if (
    s.errorClasses?.length &&
    !s.errorClasses.includes(d.errorClass) &&
    !s.errorClasses.includes(d.reason)
  ) {
    return false;
  }
  const parkedAt = Date.parse(d.parkedAt);
  if (s.since && parkedAt < s.since.getTime()) return false;
  if (s.until && parkedAt > s.until.getTime()) return false;
  if (s.ids?.length && !s.ids.includes(d.messageId ?? '')) return false;
  return true;
}

export interface RedriveResult {
  scanned: number;
  matched: number;
  moved: string[];
  dryRun: boolean;
}

/**
 * Moves the selected parked messages back to `inventory.orders` with the same message id, the
 * attempt count reset and the diagnosis headers removed (a redrive stamp is added), at most `rate`
 * per second. Each is acked in parking only after its copy was confirmed and routed. Messages that
 * do not match stay in parking. Scans at most the messages present when it starts.
 */
export async function redriveParked(
  deps: { connection: RabbitConnection; settler: RabbitSettler },
  selection: RedriveSelection,
  options: { rate?: number; dryRun?: boolean; onMoved?: (id: string) => void } = {},
): Promise<RedriveResult> {
  const interval = options.rate && options.rate > 0 ? 1000 / options.rate : 0;
  return deps.connection.withChannel(async (ch) => {
    const { messageCount } = await ch.checkQueue(RETRY_NAMES.parkingQueue);
    const result: RedriveResult = {
      scanned: 0,
      matched: 0,
      moved: [],
      dryRun: options.dryRun ?? false,
    };
    let next = Date.now();
    for (let i = 0; i < messageCount; i++) {
      const msg: GetMessage | false = await ch.get(RETRY_NAMES.parkingQueue, { noAck: false });
      if (!msg) break;
      result.scanned++;
      const parked = parkedFromRaw(rawFromAmqp(msg));
      if (!matches(parked, selection)) continue; // stays unacked: back in parking when we close
      result.matched++;
      if (options.dryRun) continue;
      const wait = next - Date.now();
      if (wait > 0) await sleep(wait);
      next = Math.max(next, Date.now()) + interval;
      const {
        [HEADERS.parkedAt]: _p,
        [HEADERS.parkReason]: _r,
        [HEADERS.errorClass]: _c,
        [HEADERS.lastError]: _e,
        [HEADERS.firstFailureAt]: _f,
        [HEADERS.consumer]: _u,
        ...kept
      } = deps.settler.baseHeaders(parked.raw);
      await deps.settler.publishCopy(
        RETRY_NAMES.requeueExchange,
        RETRY_NAMES.requeueRoutingKey,
        parked.raw,
        {
          ...kept,
          [HEADERS.attempt]: 0,
          [HEADERS.redrivenAt]: new Date().toISOString(),
          [HEADERS.redriveCount]: Number(headerString(kept, HEADERS.redriveCount) ?? 0) + 1,
        },
      );
      ch.ack(msg);
      const id = parked.diagnosis.messageId ?? '(no id)';
      result.moved.push(id);
      options.onMoved?.(id);
    }
    return result;
  });
}
