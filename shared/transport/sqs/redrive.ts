import type { MessageAttributeValue } from '@aws-sdk/client-sqs';
import type { Redrive } from '../../port/types.js';
import { SQS_ATTRIBUTES, SQS_DIAGNOSIS } from './constants.js';

/**
 * The redrive stamp on SQS messages: one attribute (`redrive`, "<count> <ISO time>"), since SQS
 * allows at most 10 attributes per message.
 */
export function encodeRedrive(r: Redrive): MessageAttributeValue {
  return { DataType: 'String', StringValue: `${r.count} ${r.lastAt}` };
}

export function decodeRedrive(value: string | undefined): Redrive | undefined {
  const m = value ? /^(\d+) (\S+)$/.exec(value) : null;
  if (!m || Number(m[1]) < 1 || Number.isNaN(Date.parse(m[2] as string))) return undefined;
  return { count: Number(m[1]), lastAt: m[2] as string };
}

/** The `redrive` attribute to send with a copy of a message (none if it was never redriven). */
export function redriveAttributes(r: Redrive | undefined): Record<string, MessageAttributeValue> {
  return r ? { [SQS_ATTRIBUTES.redrive]: encodeRedrive(r) } : {};
}

/**
 * The redrive stamp of a message received from the source queue. A message that still carries a
 * park diagnosis was moved back as it was, by a move task (`StartMessageMoveTask` keeps the
 * attributes and gives the message a new enqueue time): it counts as redriven at its
 * `SentTimestamp`.
 */
export function receivedRedrive(
  get: (name: string) => string | undefined,
  sentTimestamp: string | undefined,
): { redrive: Redrive | undefined; movedBack: boolean } {
  const stamped = decodeRedrive(get(SQS_ATTRIBUTES.redrive));
  // a park diagnosis, packed (now) or in the older layout
  const movedBack =
    get(SQS_DIAGNOSIS.packed) !== undefined || get(SQS_DIAGNOSIS.parkReason) !== undefined;
  if (!movedBack) return { redrive: stamped, movedBack };
  const sent = Number(sentTimestamp);
  return {
    movedBack,
    redrive: {
      count: (stamped?.count ?? 0) + 1,
      lastAt: new Date(Number.isFinite(sent) && sent > 0 ? sent : Date.now()).toISOString(),
    },
  };
}

/**
 * The error attributes of a parked message in the older layout (one attribute per field, before
 * the packed `diagnosis`): `error_class` and `error`; for a redriven message the class leads the
 * error (`transient: connection refused`) and the redrive stamp takes its place. Parks no longer
 * write it; tests write it to check that such messages are still read.
 */
export function parkedErrorAttributes(
  errorClass: string,
  error: string,
  redrive: Redrive | undefined,
): Record<string, MessageAttributeValue> {
  const str = (v: string): MessageAttributeValue => ({ DataType: 'String', StringValue: v });
  return redrive
    ? {
        [SQS_DIAGNOSIS.error]: str(`${errorClass}: ${error || '-'}`),
        ...redriveAttributes(redrive),
      }
    : { [SQS_DIAGNOSIS.errorClass]: str(errorClass), [SQS_DIAGNOSIS.error]: str(error || '-') };
}

/** Reads a parked error back (the class from `error_class`, or leading `error`). */
export function decodeParkedError(
  errorAttr: string | undefined,
  errorClassAttr: string | undefined,
): { errorClass: string; error: string } {
  const text = errorAttr ?? '';
  if (errorClassAttr !== undefined) return { errorClass: errorClassAttr, error: text };
  const i = text.indexOf(': ');
  return i < 0
    ? { errorClass: 'unknown', error: text }
    : { errorClass: text.slice(0, i), error: text.slice(i + 2) };
}

/**
 * The diagnosis a park writes on SQS, as one JSON attribute (`diagnosis`): SQS allows 10
 * attributes per message, and the fields of a diagnosis alone would take more. The identity
 * (event id, type, schema version, correlation id) and the redrive stamp stay attributes of their
 * own (read by the redrive paths and the consumer).
 */
export interface SqsPackedDiagnosis {
  /** Layout version. */
  v: 1;
  reason: string;
  errorClass: string;
  error: string;
  consumer: string;
  attempts: number;
  firstFailureAt: string;
  parkedAt: string;
  traceId: string | null;
  producer: string | null;
  origin: { queue: string | null; exchange: string | null; routingKey: string | null };
}

export function encodePackedDiagnosis(d: SqsPackedDiagnosis): MessageAttributeValue {
  return { DataType: 'String', StringValue: JSON.stringify(d) };
}

/** Reads a packed diagnosis back; undefined when it is absent or unreadable. */
export function decodePackedDiagnosis(value: string | undefined): SqsPackedDiagnosis | undefined {
  if (!value) return undefined;
  let o: unknown;
  try {
    o = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (!o || typeof o !== 'object') return undefined;
  const r = o as Record<string, unknown>;
  const s = (v: unknown, fallback: string) => (typeof v === 'string' ? v : fallback);
  const n = (v: unknown) => (typeof v === 'string' || typeof v === 'number' ? String(v) : null);
  const origin = (r.origin && typeof r.origin === 'object' ? r.origin : {}) as Record<
    string,
    unknown
  >;
  const parkedAt = s(r.parkedAt, new Date(0).toISOString());
  return {
    v: 1,
    reason: s(r.reason, 'permanent'),
    errorClass: s(r.errorClass, 'unknown'),
    error: s(r.error, ''),
    consumer: s(r.consumer, 'unknown'),
    attempts: Number.isInteger(r.attempts) ? (r.attempts as number) : 0,
    firstFailureAt: s(r.firstFailureAt, parkedAt),
    parkedAt,
    traceId: n(r.traceId),
    producer: n(r.producer),
    origin: {
      queue: n(origin.queue),
      exchange: n(origin.exchange),
      routingKey: n(origin.routingKey),
    },
  };
}
