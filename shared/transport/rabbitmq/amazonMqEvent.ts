import type { Message } from 'amqplib';
import { type AmqpMessage, rawMessage } from './copies.js';

/**
 * The event Lambda's Amazon MQ (RabbitMQ) event source mapping sends (docs/aws-facts.md; the example in
 * the Amazon MQ developer guide): messages grouped under `"<queue>::<vhost>"`, the body base64 in
 * `data`, string header values as `{ "bytes": [...] }`, numbers as numbers, and the timestamp as a
 * formatted date string.
 */
export type RmqHeaderValue =
  | { bytes: number[] }
  | number
  | boolean
  | null
  | RmqHeaderValue[]
  | { [k: string]: RmqHeaderValue };

export interface RmqBasicProperties {
  contentType: string | null;
  contentEncoding: string | null;
  headers: Record<string, RmqHeaderValue>;
  deliveryMode: number | null;
  priority: number | null;
  correlationId: string | null;
  replyTo: string | null;
  expiration: string | null;
  messageId: string | null;
  timestamp: string | null;
  type: string | null;
  userId: string | null;
  appId: string | null;
  clusterId: string | null;
  bodySize: number;
}

export interface RmqMessage {
  basicProperties: RmqBasicProperties;
  redelivered: boolean;
  data: string;
}

export interface RabbitMQEvent {
  eventSource: 'aws:rmq';
  eventSourceArn: string;
  rmqMessagesByQueue: Record<string, RmqMessage[]>;
}

function encodeHeader(v: unknown): RmqHeaderValue {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') return { bytes: [...Buffer.from(v, 'utf8')] };
  if (Buffer.isBuffer(v)) return { bytes: [...v] };
  if (typeof v === 'number' || typeof v === 'boolean') return v;
  if (typeof v === 'bigint') return Number(v);
  if (v instanceof Date) return Math.floor(v.getTime() / 1000);
  if (Array.isArray(v)) return v.map(encodeHeader);
  if (typeof v === 'object') {
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, encodeHeader(x)]),
    );
  }
  return { bytes: [...Buffer.from(String(v), 'utf8')] };
}

function decodeHeader(v: RmqHeaderValue): unknown {
  if (v === null || typeof v === 'number' || typeof v === 'boolean') return v;
  if (Array.isArray(v)) return v.map(decodeHeader);
  if (typeof v === 'object' && 'bytes' in v && Array.isArray(v.bytes)) {
    return Buffer.from(v.bytes as number[]).toString('utf8');
  }
  return Object.fromEntries(
    Object.entries(v).map(([k, x]) => [k, decodeHeader(x as RmqHeaderValue)]),
  );
}

/** "Jan 1, 1970, 12:33:41 AM", as in AWS's example (UTC). */
function formatTimestamp(seconds: number): string {
  return new Date(seconds * 1000).toLocaleString('en-US', {
    timeZone: 'UTC',
    month: 'short',
    day: 'numeric',
    year: 'numeric',
    hour: 'numeric',
    minute: '2-digit',
    second: '2-digit',
    hour12: true,
  });
}

/** Builds the record Lambda would send for a message consumed from RabbitMQ (local emulation). */
export function toRmqMessage(msg: Message, redelivered: boolean): RmqMessage {
  const p = msg.properties;
  return {
    basicProperties: {
      contentType: p.contentType ?? null,
      contentEncoding: p.contentEncoding ?? null,
      headers: Object.fromEntries(
        Object.entries(p.headers ?? {}).map(([k, v]) => [k, encodeHeader(v)]),
      ),
      deliveryMode: p.deliveryMode ?? null,
      priority: p.priority ?? null,
      correlationId: p.correlationId ?? null,
      replyTo: p.replyTo ?? null,
      expiration: p.expiration ?? null,
      messageId: p.messageId ?? null,
      timestamp: typeof p.timestamp === 'number' ? formatTimestamp(p.timestamp) : null,
      type: p.type ?? null,
      userId: p.userId ?? null,
      appId: p.appId ?? null,
      clusterId: p.clusterId ?? null,
      bodySize: msg.content.length,
    },
    redelivered,
    data: msg.content.toString('base64'),
  };
}

/** The queue key Lambda uses: `<queue>::<vhost>`. */
export const rmqQueueKey = (queue: string, vhost: string) => `${queue}::${vhost}`;

/** What the handler needs of a record to process it and, if needed, publish a copy. */
export function rawFromRmqMessage(m: RmqMessage): AmqpMessage {
  const p = m.basicProperties;
  const timestamp = p.timestamp ? Date.parse(`${p.timestamp} UTC`) : Number.NaN;
  return rawMessage(
    Buffer.from(m.data, 'base64'),
    p,
    Number.isNaN(timestamp) ? undefined : Math.floor(timestamp / 1000),
    Object.fromEntries(Object.entries(p.headers ?? {}).map(([k, v]) => [k, decodeHeader(v)])),
  );
}
