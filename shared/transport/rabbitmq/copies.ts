import type { Message } from 'amqplib';
import { type RetryBudget, rabbitRetryBucket } from '../../config/budget.js';
import type { Diagnosis, InboundMessage, Origin, Redrive, RetryRequest } from '../../port/types.js';
import type { ConfirmedChannel } from './ConfirmedChannel.js';
import { HEADERS, MAX_ERROR_HEADER, RABBITMQ_DEFAULTS } from './constants.js';
import { SettlePublishError } from './errors.js';
import { isOwnExchange, type RabbitQueueNames } from './topology.js';

/** What the backend needs of a received message to read it and to publish a copy of it. */
export interface AmqpMessage {
  content: Buffer;
  properties: {
    messageId?: string | undefined;
    type?: string | undefined;
    correlationId?: string | undefined;
    contentType?: string | undefined;
    contentEncoding?: string | undefined;
    appId?: string | undefined;
    timestamp?: number | undefined;
    headers: Record<string, unknown>;
  };
}

/** The properties a copy keeps, from AMQP properties (absent and null both become undefined). */
export function rawMessage(
  content: Buffer,
  p: {
    messageId?: string | null;
    type?: string | null;
    correlationId?: string | null;
    contentType?: string | null;
    contentEncoding?: string | null;
    appId?: string | null;
  },
  timestamp: number | undefined,
  headers: Record<string, unknown>,
): AmqpMessage {
  return {
    content,
    properties: {
      messageId: p.messageId ?? undefined,
      type: p.type ?? undefined,
      correlationId: p.correlationId ?? undefined,
      contentType: p.contentType ?? undefined,
      contentEncoding: p.contentEncoding ?? undefined,
      appId: p.appId ?? undefined,
      timestamp,
      headers,
    },
  };
}

export function rawFromAmqp(msg: Message): AmqpMessage {
  const p = msg.properties;
  return rawMessage(msg.content, p, p.timestamp ?? undefined, { ...(p.headers ?? {}) });
}

export function headerString(headers: Record<string, unknown>, name: string): string | undefined {
  const v = headers[name];
  if (v === undefined || v === null) return undefined;
  return Buffer.isBuffer(v) ? v.toString('utf8') : String(v);
}

/** How a message reached its consumer: the queue, and the delivery's exchange and routing key. */
export interface DeliveredVia {
  queue?: string | undefined;
  exchange?: string | undefined;
  routingKey?: string | undefined;
}

/**
 * Where a message came from: the headers the publisher and our copies set (they survive retries,
 * parking and redrive), else the delivery itself (a message published by someone else).
 */
export function originOf(h: Record<string, unknown>, via: DeliveredVia = {}): Origin {
  // our own exchanges a retry or redrive comes back through are not the message's original route
  const fromDelivery = via.exchange !== undefined && !isOwnExchange(via.exchange);
  return {
    queue: headerString(h, HEADERS.originQueue) ?? via.queue ?? null,
    exchange:
      headerString(h, HEADERS.originExchange) ??
      (fromDelivery ? via.exchange || '(default exchange)' : null),
    routingKey:
      headerString(h, HEADERS.originRoutingKey) ?? (fromDelivery ? (via.routingKey ?? null) : null),
  };
}

/** The origin headers a copy carries. */
function originHeaders(origin: Origin | undefined): Record<string, string> {
  if (!origin) return {};
  return {
    ...(origin.queue ? { [HEADERS.originQueue]: origin.queue } : {}),
    ...(origin.exchange ? { [HEADERS.originExchange]: origin.exchange } : {}),
    ...(origin.routingKey ? { [HEADERS.originRoutingKey]: origin.routingKey } : {}),
  };
}

/** A raw AMQP message as the transport port's inbound message. */
export function inboundFromRaw(
  raw: AmqpMessage,
  redelivered: boolean,
  via: DeliveredVia = {},
): InboundMessage {
  const h = raw.properties.headers;
  const attempt = Number(headerString(h, HEADERS.attempt) ?? 0);
  return {
    messageId: raw.properties.messageId,
    body: raw.content,
    attempt: Number.isInteger(attempt) && attempt >= 0 ? attempt : 0,
    redelivered,
    firstFailureAt: headerString(h, HEADERS.firstFailureAt),
    type: raw.properties.type,
    schemaVersion: headerString(h, HEADERS.schemaVersion),
    correlationId: raw.properties.correlationId,
    producer: raw.properties.appId,
    origin: originOf(h, via),
    ...redriveOf(h),
  };
}

/** The redrive stamp (`x-redrive-count`, `x-redriven-at`) of a message, if it was redriven. */
export function redriveOf(h: Record<string, unknown>): { redrive?: Redrive } {
  const count = Number(headerString(h, HEADERS.redriveCount) ?? 0);
  const lastAt = headerString(h, HEADERS.redrivenAt);
  return Number.isInteger(count) && count > 0 && lastAt ? { redrive: { count, lastAt } } : {};
}

const truncate = (s: string, max = MAX_ERROR_HEADER) =>
  s.length > max ? `${s.slice(0, max - 1)}…` : s;

/**
 * The message's headers without the ones the broker keeps: dead lettering (`x-death`,
 * `x-first-death-*`, and the `x-last-death-*` that 4.0.5 adds and 3.10 does not) and the quorum
 * queue's `x-delivery-count` (which 4.0.5 sets only from the first return on, where 3.10 sends 0:
 * a copy carrying the original's would show a stale count there).
 */
export function baseHeaders(raw: AmqpMessage): Record<string, unknown> {
  const {
    'x-death': _d,
    'x-first-death-exchange': _e,
    'x-first-death-queue': _q,
    'x-first-death-reason': _r,
    'x-last-death-exchange': _le,
    'x-last-death-queue': _lq,
    'x-last-death-reason': _lr,
    'x-delivery-count': _c,
    ...rest
  } = raw.properties.headers;
  return rest;
}

/**
 * The copies the backend makes of a received message, each through the one confirmed publish
 * primitive (same message id and properties, headers kept):
 * - retry: `x-retry-attempt` and `x-last-error` set, to `inventory.orders.retry` with the delay
 *   bucket as routing key; its queue's TTL holds it, then dead-letters it to `inventory.orders`;
 * - park: the diagnosis in headers, to `inventory.orders.dlx` → `inventory.orders.parking`;
 * - redrive: the diagnosis removed and the attempts reset, through `inventory.orders.requeue`
 *   (bound to `inventory.orders` only, so no other queue gets a copy).
 * A copy counts only once the broker confirmed it and did not return it: otherwise
 * `SettlePublishError`.
 */
export class RabbitCopies {
  constructor(
    private readonly channel: ConfirmedChannel,
    /** The consumer queue whose retry, park and redrive copies these are. */
    readonly names: RabbitQueueNames,
    private readonly options: {
      /** Only retries need it: the delay bucket of a ladder step (jitter picks a neighbour). */
      budget?: RetryBudget;
      confirmTimeoutMs?: number;
    } = {},
  ) {}

  private async publish(
    exchange: string,
    routingKey: string,
    raw: AmqpMessage,
    headers: Record<string, unknown>,
  ): Promise<void> {
    const p = raw.properties;
    const { confirmed } = this.channel.publish(exchange, routingKey, raw.content, {
      ...(p.messageId ? { messageId: p.messageId } : {}),
      ...(p.type ? { type: p.type } : {}),
      ...(p.correlationId ? { correlationId: p.correlationId } : {}),
      ...(p.contentType ? { contentType: p.contentType } : {}),
      ...(p.contentEncoding ? { contentEncoding: p.contentEncoding } : {}),
      ...(p.appId ? { appId: p.appId } : {}),
      ...(p.timestamp ? { timestamp: p.timestamp } : {}),
      headers,
    });
    const timeoutMs = this.options.confirmTimeoutMs ?? RABBITMQ_DEFAULTS.confirmTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const result = await Promise.race([
      confirmed,
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
    if (!result) {
      void this.channel.reset(); // its state is unknown now
      throw new SettlePublishError(`no confirm within ${timeoutMs} ms`);
    }
    if (!result.ok) {
      throw new SettlePublishError(
        `publish to ${exchange} (${routingKey}) failed: ${result.reason}: ${result.error}`,
      );
    }
  }

  /** Publishes the retry copy; resolves with the delay bucket it went to (ms). */
  async retry(raw: AmqpMessage, retry: RetryRequest): Promise<number> {
    const { budget } = this.options;
    if (!budget) throw new Error('retry copies need the retry budget');
    const bucket = rabbitRetryBucket(budget, retry.delayMs);
    await this.publish(this.names.retryExchange, String(bucket), raw, {
      ...baseHeaders(raw),
      [HEADERS.attempt]: retry.attempt,
      [HEADERS.lastError]: truncate(retry.error),
      [HEADERS.errorClass]: retry.errorClass,
      [HEADERS.firstFailureAt]: retry.firstFailureAt,
      ...originHeaders(retry.origin),
    });
    return bucket;
  }

  async park(raw: AmqpMessage, d: Diagnosis): Promise<void> {
    await this.publish(this.names.parkingExchange, this.names.parkingRoutingKey, raw, {
      ...baseHeaders(raw),
      [HEADERS.attempt]: d.attempts,
      [HEADERS.firstFailureAt]: d.firstFailureAt,
      [HEADERS.parkedAt]: d.parkedAt,
      [HEADERS.parkReason]: d.reason,
      [HEADERS.errorClass]: d.errorClass,
      [HEADERS.lastError]: d.error,
      [HEADERS.consumer]: d.consumer,
      ...(d.schemaVersion ? { [HEADERS.schemaVersion]: d.schemaVersion } : {}),
      ...(d.traceId ? { [HEADERS.traceId]: d.traceId } : {}),
      ...(d.producer ? { [HEADERS.producer]: d.producer } : {}),
      ...originHeaders(d.origin),
    });
  }

  async redrive(raw: AmqpMessage, now = new Date()): Promise<void> {
    const {
      [HEADERS.parkedAt]: _p,
      [HEADERS.parkReason]: _r,
      [HEADERS.errorClass]: _c,
      [HEADERS.lastError]: _e,
      [HEADERS.firstFailureAt]: _f,
      [HEADERS.consumer]: _u,
      [HEADERS.traceId]: _t,
      [HEADERS.producer]: _pr,
      ...kept
    } = baseHeaders(raw);
    await this.publish(this.names.requeueExchange, this.names.requeueRoutingKey, raw, {
      ...kept,
      [HEADERS.attempt]: 0,
      [HEADERS.redrivenAt]: now.toISOString(),
      [HEADERS.redriveCount]: Number(headerString(kept, HEADERS.redriveCount) ?? 0) + 1,
    });
  }
}
