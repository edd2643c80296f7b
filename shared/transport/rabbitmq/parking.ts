import type { GetMessage } from 'amqplib';
import { matches, overRedriveLimit, pacer } from '../../consumer/parking.js';
import { peekEnvelope } from '../../consumer/peek.js';
import type {
  ParkedEntry,
  ParkingLot,
  ParkReason,
  RedriveOptions,
  RedriveResult,
  RedriveSelection,
} from '../../port/types.js';
import { pollUntil } from '../../util/async.js';
import { HEADERS } from './constants.js';
import {
  type AmqpMessage,
  headerString,
  originOf,
  type RabbitCopies,
  rawFromAmqp,
  redriveOf,
} from './copies.js';
import type { RabbitConnection } from './RabbitConnection.js';

/**
 * Parking lot operations on RabbitMQ: read the diagnoses, and move selected messages back to
 * `inventory.orders` (through `inventory.orders.requeue`, so no other queue gets a copy). Never
 * automatic: an operator runs it after fixing the cause.
 *
 * Reading uses basic.get without acking, then closes the channel: unacked messages return to the
 * queue. Each return counts as a delivery (`x-delivery-count`, on 3.10 and 4.0.5 alike), so the
 * parking queue's policy turns the delivery limit off (RabbitMQ 4's default of 20 would drop every
 * parked message, silently, at the 21st read: measured on 4.0.5). A quorum queue takes them back
 * asynchronously, after the close completed, so both operations wait until the messages they held
 * are ready again: a `list` right after a `list` sees the same parking lot.
 */
export interface ParkedMessage extends ParkedEntry {
  raw: AmqpMessage;
}

interface XDeath {
  reason?: string;
  queue?: string;
  exchange?: string;
  'routing-keys'?: unknown[];
  time?: { value?: number } | number;
  count?: number;
}

export function parkedFromRaw(raw: AmqpMessage): ParkedMessage {
  const h = raw.properties.headers;
  const death = (Array.isArray(h['x-death']) ? (h['x-death'][0] as XDeath) : undefined) ?? {};
  const body = peekEnvelope(raw.content);
  const origin = originOf(h);
  const deathKey = death['routing-keys']?.[0];
  const common = {
    messageId: raw.properties.messageId ?? null,
    type: raw.properties.type ?? body.type ?? null,
    schemaVersion: headerString(h, HEADERS.schemaVersion) ?? body.schemaVersion ?? null,
    attempts: Number(headerString(h, HEADERS.attempt) ?? 0),
    correlationId: raw.properties.correlationId ?? body.correlationId ?? null,
    // parked by an older consumer: no trace or producer header, the body still says
    traceId: headerString(h, HEADERS.traceId) ?? body.traceId ?? null,
    producer: headerString(h, HEADERS.producer) ?? raw.properties.appId ?? body.producer ?? null,
    origin: {
      queue: origin.queue ?? death.queue ?? null,
      exchange: origin.exchange ?? death.exchange ?? null,
      routingKey:
        origin.routingKey ??
        (deathKey === undefined || deathKey === null ? null : String(deathKey)),
    },
    ...redriveDiagnosis(h),
  };
  const parkedAt = headerString(h, HEADERS.parkedAt);
  if (parkedAt) {
    return {
      via: 'consumer',
      raw,
      body: raw.content,
      diagnosis: {
        ...common,
        firstFailureAt: headerString(h, HEADERS.firstFailureAt) ?? parkedAt,
        parkedAt,
        reason: (headerString(h, HEADERS.parkReason) ?? 'permanent') as ParkReason,
        errorClass: headerString(h, HEADERS.errorClass) ?? 'unknown',
        error: headerString(h, HEADERS.lastError) ?? '',
        consumer: headerString(h, HEADERS.consumer) ?? 'unknown',
      },
    };
  }
  // Dead-lettered by the broker (nack without requeue, delivery limit): x-death says why.
  const t = typeof death.time === 'number' ? death.time : death.time?.value;
  const at = t ? new Date(t * 1000).toISOString() : new Date(0).toISOString();
  return {
    via: 'broker',
    raw,
    body: raw.content,
    diagnosis: {
      ...common,
      firstFailureAt: headerString(h, HEADERS.firstFailureAt) ?? at,
      parkedAt: at,
      reason: 'exhausted',
      errorClass: `broker:${death.reason ?? 'unknown'}`,
      error: `dead-lettered by the broker from ${death.queue ?? '?'} (${death.reason ?? '?'}, ${death.count ?? 1}×)`,
      consumer: 'broker',
    },
  };
}

/** The diagnosis fields of a redriven message (none for one never redriven). */
function redriveDiagnosis(h: Record<string, unknown>) {
  const { redrive } = redriveOf(h);
  return redrive ? { redriveCount: redrive.count, lastRedriveAt: redrive.lastAt } : {};
}

const RETURN_TIMEOUT_MS = 5_000;

/**
 * Waits (bounded) until the parking queue holds at least `ready` ready messages again, after a
 * channel that held some unacked was closed. Gives up quietly: the messages are safe either way,
 * only a reader arriving in the gap would miss them.
 */
async function untilReturned(
  connection: RabbitConnection,
  queue: string,
  ready: number,
): Promise<void> {
  if (ready === 0) return;
  await pollUntil(
    async () => (await connection.withChannel((ch) => ch.checkQueue(queue))).messageCount >= ready,
    { timeoutMs: RETURN_TIMEOUT_MS, intervalMs: 20 },
  );
}

/** Reads up to `limit` parked messages of parking queue `queue` without removing them. */
export async function listParked(
  connection: RabbitConnection,
  queue: string,
  limit = 100,
): Promise<ParkedMessage[]> {
  let ready = 0;
  const out = await connection.withChannel(async (ch) => {
    ready = (await ch.checkQueue(queue)).messageCount;
    const read: ParkedMessage[] = [];
    for (let i = 0; i < Math.min(limit, ready); i++) {
      const msg = await ch.get(queue, { noAck: false });
      if (!msg) break;
      read.push(parkedFromRaw(rawFromAmqp(msg)));
    }
    return read; // the channel closes: every message read goes back to the queue
  });
  if (out.length > 0) await untilReturned(connection, queue, ready);
  return out;
}

/**
 * Moves the selected parked messages back to their queue (the copies') with the same message id, the
 * attempt count reset and the diagnosis headers removed (a redrive stamp is added), at most `rate`
 * per second. Each is acked in parking only after its copy was confirmed and routed. Messages that
 * do not match stay in parking, and so do matched ones already redriven `deps.redriveLimit` times
 * (or `options.redriveLimit`), reported in `skipped`, unless `options.beyondLimit`. Scans at most
 * the messages present when it starts.
 */
export async function redriveParked(
  deps: { connection: RabbitConnection; copies: RabbitCopies; redriveLimit: number },
  selection: RedriveSelection,
  options: RedriveOptions = {},
): Promise<RedriveResult> {
  const pace = pacer(options.rate);
  let ready = 0;
  const outcome = await deps.connection.withChannel(async (ch) => {
    const { messageCount } = await ch.checkQueue(deps.copies.names.parkingQueue);
    ready = messageCount;
    const result: RedriveResult = {
      scanned: 0,
      matched: 0,
      moved: [],
      dryRun: options.dryRun ?? false,
      skipped: [],
    };
    for (let i = 0; i < messageCount; i++) {
      const msg: GetMessage | false = await ch.get(deps.copies.names.parkingQueue, {
        noAck: false,
      });
      if (!msg) break;
      result.scanned++;
      const parked = parkedFromRaw(rawFromAmqp(msg));
      if (!matches(parked, selection)) continue; // stays unacked: back in parking when we close
      result.matched++;
      const skip = overRedriveLimit(parked, deps.redriveLimit, options);
      if (skip) {
        result.skipped.push(skip); // stays unacked: back in parking, its diagnosis untouched
        continue;
      }
      if (options.dryRun) continue;
      await pace();
      await deps.copies.redrive(parked.raw);
      ch.ack(msg);
      const id = parked.diagnosis.messageId ?? '(no id)';
      result.moved.push(id);
      options.onMoved?.(id);
    }
    return result;
  });
  // The ones left unacked (not matched, at the limit, or a dry run) go back when the channel closed.
  if (outcome.scanned > outcome.moved.length) {
    await untilReturned(
      deps.connection,
      deps.copies.names.parkingQueue,
      ready - outcome.moved.length,
    );
  }
  return outcome;
}

/** The RabbitMQ parking lot behind the transport-neutral interface. */
export function rabbitParkingLot(deps: {
  connection: RabbitConnection;
  copies: RabbitCopies;
  /** Redrives per message allowed (`REDRIVE_LIMIT`). */
  redriveLimit: number;
}): ParkingLot {
  return {
    list: (limit) => listParked(deps.connection, deps.copies.names.parkingQueue, limit),
    redrive: (selection, options) => redriveParked(deps, selection, options),
  };
}
