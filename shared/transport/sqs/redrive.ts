import type { MessageAttributeValue } from '@aws-sdk/client-sqs';
import type { Redrive } from '../types.js';
import { SQS_ATTRIBUTES, SQS_DIAGNOSIS } from './constants.js';

/**
 * The redrive stamp on SQS messages: one attribute (`redrive`, "<count> <ISO time>"), since SQS
 * allows at most 10 attributes per message and a parked message already carries nine.
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
  const movedBack = get(SQS_DIAGNOSIS.parkReason) !== undefined;
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
 * The error attributes of a parked message: `error_class` and `error`; for a redriven message
 * the class leads the error (`transient: connection refused`) and the redrive stamp takes its
 * place, so the diagnosis stays within SQS's 10 attributes.
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
