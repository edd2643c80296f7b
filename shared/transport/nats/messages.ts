import type { JsMsg, StoredMsg } from '@nats-io/jetstream';
import { type MsgHdrs, headers as newHeaders } from '@nats-io/transport-node';
import { z } from 'zod';
import { peekEnvelope } from '../../consumer/peek.js';
import type { Envelope } from '../../envelope/envelope.js';
import type {
  Diagnosis,
  InboundMessage,
  ParkedEntry,
  ParkReason,
  Redrive,
} from '../../port/types.js';
import { IDENTITY_HEADERS, NATS_HEADERS } from './constants.js';

/** A header's value, or undefined when absent (the client reads an absent header as ''). */
export function header(h: MsgHdrs | undefined, name: string): string | undefined {
  const value = h?.get(name);
  return value ? value : undefined;
}

/** The headers of a first publish: the envelope's identity, as the other transports carry it. */
export function envelopeHeaders(e: Envelope): MsgHdrs {
  const h = newHeaders();
  h.set(NATS_HEADERS.eventId, e.id);
  h.set(NATS_HEADERS.eventType, e.type);
  h.set(NATS_HEADERS.schemaVersion, e.schema_version);
  h.set(NATS_HEADERS.correlationId, e.correlation_id);
  h.set(NATS_HEADERS.producer, e.producer);
  return h;
}

/** A copy's headers: the original's identity headers, and its redrive stamp unless `redrive`. */
export function copyHeaders(from: MsgHdrs | undefined, redrive?: Redrive): MsgHdrs {
  const h = newHeaders();
  for (const name of IDENTITY_HEADERS) {
    const value = header(from, name);
    if (value !== undefined) h.set(name, value);
  }
  const stamp = redrive ?? redriveOf(from);
  if (stamp) {
    h.set(NATS_HEADERS.redriveCount, String(stamp.count));
    h.set(NATS_HEADERS.redrivenAt, stamp.lastAt);
  }
  return h;
}

/** The redrive stamp a message carries, if it was redriven. */
export function redriveOf(h: MsgHdrs | undefined): Redrive | undefined {
  const count = Number(header(h, NATS_HEADERS.redriveCount));
  const lastAt = header(h, NATS_HEADERS.redrivenAt);
  if (!Number.isInteger(count) || count < 1 || !lastAt || Number.isNaN(Date.parse(lastAt))) {
    return undefined;
  }
  return { count, lastAt };
}

/**
 * A delivery as the transport port's inbound message. A retry is the same message delivered
 * again (a nak with a delay), so, as in SQS's visibility mode, the attempt is the delivery count
 * less one and a give-back counts as an attempt too. JetStream does not tell when a message was
 * first delivered: once it was delivered before, its first failure is taken as the time it was
 * stored, the closest the server tells and never later than the real one (a redriven message is
 * a new one, stored at its redrive).
 */
export function inboundOf(msg: JsMsg, queue: string): InboundMessage {
  const h = msg.headers;
  const deliveries = msg.info.deliveryCount;
  const redrive = redriveOf(h);
  return {
    messageId: header(h, NATS_HEADERS.eventId),
    body: Buffer.from(msg.data),
    attempt: Math.max(0, deliveries - 1),
    redelivered: msg.redelivered,
    firstFailureAt: deliveries > 1 ? msg.time.toISOString() : undefined,
    type: header(h, NATS_HEADERS.eventType),
    schemaVersion: header(h, NATS_HEADERS.schemaVersion),
    correlationId: header(h, NATS_HEADERS.correlationId),
    producer: header(h, NATS_HEADERS.producer),
    origin: { queue, exchange: msg.info.stream, routingKey: msg.subject },
    ...(redrive ? { redrive } : {}),
  };
}

/** What a park copy's `Diagnosis` header holds: the diagnosis less what other headers carry. */
const packedDiagnosis = z.object({
  attempts: z.number(),
  firstFailureAt: z.string(),
  parkedAt: z.string(),
  reason: z.string(),
  errorClass: z.string(),
  error: z.string(),
  consumer: z.string(),
  traceId: z.string().nullable(),
  producer: z.string().nullable(),
  origin: z.object({
    queue: z.string().nullable(),
    exchange: z.string().nullable(),
    routingKey: z.string().nullable(),
  }),
});

/**
 * The headers of a park copy: the original's identity and redrive stamp, the diagnosis as one
 * JSON value (as SQS's packed attribute) and the subject a redrive publishes it back to.
 */
export function parkHeaders(msg: JsMsg, diagnosis: Diagnosis): MsgHdrs {
  const h = copyHeaders(msg.headers);
  const packed: z.infer<typeof packedDiagnosis> = {
    attempts: diagnosis.attempts,
    firstFailureAt: diagnosis.firstFailureAt,
    parkedAt: diagnosis.parkedAt,
    reason: diagnosis.reason,
    errorClass: diagnosis.errorClass,
    error: diagnosis.error,
    consumer: diagnosis.consumer,
    traceId: diagnosis.traceId,
    producer: diagnosis.producer,
    origin: diagnosis.origin,
  };
  h.set(NATS_HEADERS.diagnosis, JSON.stringify(packed));
  h.set(NATS_HEADERS.originSubject, msg.subject);
  return h;
}

function unpack(value: string | undefined): z.infer<typeof packedDiagnosis> | undefined {
  if (!value) return undefined;
  try {
    const parsed = packedDiagnosis.safeParse(JSON.parse(value));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A message of the parking stream and its diagnosis. Only consumers park here (JetStream moves
 * nothing by itself); a copy whose diagnosis cannot be read still lists, dated by its storage.
 */
export function parkedEntry(m: StoredMsg): ParkedEntry {
  const h = m.header;
  const body = peekEnvelope(Buffer.from(m.data));
  const redrive = redriveOf(h);
  const packed = unpack(header(h, NATS_HEADERS.diagnosis));
  const stored = m.time.toISOString();
  return {
    via: 'consumer',
    body: Buffer.from(m.data),
    diagnosis: {
      // the transport's id only, as on the other backends: a message parked for having none
      // is listed without one, not under an id its body claims
      messageId: header(h, NATS_HEADERS.eventId) ?? null,
      type: header(h, NATS_HEADERS.eventType) ?? body.type ?? null,
      schemaVersion: header(h, NATS_HEADERS.schemaVersion) ?? body.schemaVersion ?? null,
      correlationId: header(h, NATS_HEADERS.correlationId) ?? body.correlationId ?? null,
      attempts: packed?.attempts ?? 0,
      firstFailureAt: packed?.firstFailureAt ?? stored,
      parkedAt: packed?.parkedAt ?? stored,
      reason: (packed?.reason ?? 'exhausted') as ParkReason,
      errorClass: packed?.errorClass ?? 'unknown',
      error: packed?.error ?? 'no readable diagnosis on the parked copy',
      consumer: packed?.consumer ?? 'unknown',
      traceId: packed?.traceId ?? body.traceId ?? null,
      producer: packed?.producer ?? header(h, NATS_HEADERS.producer) ?? body.producer ?? null,
      origin: packed?.origin ?? {
        queue: null,
        exchange: null,
        routingKey: header(h, NATS_HEADERS.originSubject) ?? null,
      },
      ...(redrive ? { redriveCount: redrive.count, lastRedriveAt: redrive.lastAt } : {}),
    },
  };
}
