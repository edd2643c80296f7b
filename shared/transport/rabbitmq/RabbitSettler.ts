import type { ConfirmChannel, Message } from 'amqplib';
import { type RetryBudget, rabbitRetryBucket } from '../../config/budget.js';
import type { Diagnosis, InboundMessage, Outcome } from '../../consumer/types.js';
import { TransportError } from '../errors.js';
import type { RabbitConnection } from './RabbitConnection.js';
import { RETRY_NAMES } from './topology.js';

/** Headers this project sets on messages (x-death is the broker's). */
export const HEADERS = {
  attempt: 'x-retry-attempt',
  lastError: 'x-last-error',
  errorClass: 'x-error-class',
  firstFailureAt: 'x-first-failure-at',
  parkedAt: 'x-parked-at',
  parkReason: 'x-park-reason',
  consumer: 'x-consumer',
  schemaVersion: 'x-schema-version',
  redrivenAt: 'x-redriven-at',
  redriveCount: 'x-redrive-count',
} as const;

const MAX_ERROR_HEADER = 256;

/** What a settler needs of a received message to publish a copy of it. */
export interface RawMessage {
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

/** A settle publish was refused or lost: the original must not be acknowledged. */
export class SettlePublishError extends TransportError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SettlePublishError';
  }
}

export function rawFromAmqp(msg: Message): RawMessage {
  const p = msg.properties;
  return {
    content: msg.content,
    properties: {
      messageId: p.messageId ?? undefined,
      type: p.type ?? undefined,
      correlationId: p.correlationId ?? undefined,
      contentType: p.contentType ?? undefined,
      contentEncoding: p.contentEncoding ?? undefined,
      appId: p.appId ?? undefined,
      timestamp: p.timestamp ?? undefined,
      headers: { ...(p.headers ?? {}) },
    },
  };
}

export function headerString(headers: Record<string, unknown>, name: string): string | undefined {
  const v = headers[name];
  if (v === undefined || v === null) return undefined;
  return Buffer.isBuffer(v) ? v.toString('utf8') : String(v);
}

/** Turns a raw AMQP message into the use case's input. */
export function inboundFromRaw(raw: RawMessage, redelivered: boolean): InboundMessage {
  const h = raw.properties.headers;
  const attempt = Number(headerString(h, HEADERS.attempt) ?? 0);
  return {
    messageId: raw.properties.messageId,
    body: raw.content,
    attempt: Number.isInteger(attempt) && attempt >= 0 ? attempt : 0,
    redelivered,
    firstFailureAt: headerString(h, HEADERS.firstFailureAt),
    type: raw.properties.type,
    correlationId: raw.properties.correlationId,
  };
}

const truncate = (s: string, max = MAX_ERROR_HEADER) =>
  s.length > max ? `${s.slice(0, max - 1)}…` : s;

/**
 * Settles retry and park outcomes on RabbitMQ by confirmed publishes on a channel of its own:
 * - retry: a copy (same message id and properties, headers kept, `x-retry-attempt` + 1,
 *   `x-last-error`) to `inventory.orders.retry` with the delay as routing key; its queue's TTL
 *   holds it, then dead-letters it back to `inventory.orders` only;
 * - park: a copy with the diagnosis in headers to `inventory.orders.dlx` → `inventory.orders.parking`.
 * A publish counts only when the broker confirmed it and did not return it (mandatory): otherwise
 * `SettlePublishError`, and the caller must not ack the original. Publishes are serialized, so a
 * `basic.return` always belongs to the one publish in flight (parked messages may lack an id).
 */
export class RabbitSettler {
  private channel: ConfirmChannel | undefined;
  private opening: Promise<ConfirmChannel> | undefined;
  private returned: string | undefined;
  private closedWhy: string | undefined;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly deps: { connection: RabbitConnection },
    private readonly options: { budget: RetryBudget; consumer: string; confirmTimeoutMs?: number },
  ) {}

  private async ch(): Promise<ConfirmChannel> {
    if (this.channel) return this.channel;
    this.opening ??= this.deps.connection
      .openChannel()
      .then((ch) => {
        ch.on('return', (msg: Message) => {
          const f = msg.fields as unknown as { replyCode?: number; replyText?: string };
          this.returned = `${f.replyCode} ${f.replyText}`;
        });
        ch.on('error', (err: Error) => {
          this.closedWhy = err.message;
        });
        ch.on('close', () => {
          if (this.channel === ch) this.channel = undefined;
        });
        this.channel = ch;
        this.closedWhy = undefined;
        return ch;
      })
      .finally(() => {
        this.opening = undefined;
      });
    return this.opening;
  }

  /**
   * Publishes a copy of `raw` with `headers` (replacing its headers), confirmed and routable, or
   * throws `SettlePublishError`. Serialized with every other publish of this settler.
   */
  publishCopy(
    exchange: string,
    routingKey: string,
    raw: RawMessage,
    headers: Record<string, unknown>,
  ): Promise<void> {
    const run = async () => {
      let ch: ConfirmChannel;
      try {
        ch = await this.ch();
      } catch (err) {
        throw new SettlePublishError(`cannot reach the broker: ${(err as Error).message}`, {
          cause: err,
        });
      }
      this.returned = undefined;
      const timeoutMs = this.options.confirmTimeoutMs ?? 10_000;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(new SettlePublishError(`no confirm within ${timeoutMs} ms`));
          void this.reset();
        }, timeoutMs);
        try {
          const p = raw.properties;
          ch.publish(
            exchange,
            routingKey,
            raw.content,
            {
              persistent: true,
              mandatory: true,
              ...(p.messageId ? { messageId: p.messageId } : {}),
              ...(p.type ? { type: p.type } : {}),
              ...(p.correlationId ? { correlationId: p.correlationId } : {}),
              ...(p.contentType ? { contentType: p.contentType } : {}),
              ...(p.contentEncoding ? { contentEncoding: p.contentEncoding } : {}),
              ...(p.appId ? { appId: p.appId } : {}),
              ...(p.timestamp ? { timestamp: p.timestamp } : {}),
              headers,
            },
            (err: unknown) => {
              clearTimeout(timer);
              if (err) {
                const why = this.closedWhy ?? (err as Error).message;
                reject(new SettlePublishError(`publish to ${exchange} failed: ${why}`));
              } else if (this.returned !== undefined) {
                reject(
                  new SettlePublishError(
                    `publish to ${exchange} (${routingKey}) returned: ${this.returned}`,
                  ),
                );
              } else {
                resolve();
              }
            },
          );
        } catch (err) {
          clearTimeout(timer);
          reject(
            new SettlePublishError(`publish to ${exchange} failed: ${(err as Error).message}`, {
              cause: err,
            }),
          );
        }
      });
    };
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => {});
    return result;
  }

  /** Copies the message headers without broker-managed ones. */
  baseHeaders(raw: RawMessage): Record<string, unknown> {
    const {
      'x-death': _d,
      'x-first-death-exchange': _e,
      'x-first-death-queue': _q,
      'x-first-death-reason': _r,
      ...rest
    } = raw.properties.headers;
    return rest;
  }

  async retry(
    raw: RawMessage,
    outcome: Extract<Outcome, { kind: 'retry' }>,
    now = new Date(),
  ): Promise<number> {
    const bucket = rabbitRetryBucket(this.options.budget, outcome.delayMs);
    const h = this.baseHeaders(raw);
    await this.publishCopy(RETRY_NAMES.retryExchange, String(bucket), raw, {
      ...h,
      [HEADERS.attempt]: outcome.attempt,
      [HEADERS.lastError]: truncate(outcome.error),
      [HEADERS.errorClass]: outcome.errorClass,
      [HEADERS.firstFailureAt]: headerString(h, HEADERS.firstFailureAt) ?? now.toISOString(),
    });
    return bucket;
  }

  diagnosis(
    raw: RawMessage,
    outcome: Extract<Outcome, { kind: 'park' }>,
    attempts: number,
    now = new Date(),
  ): Diagnosis {
    const h = raw.properties.headers;
    let schemaVersion = headerString(h, HEADERS.schemaVersion) ?? null;
    let type = raw.properties.type ?? null;
    if (!schemaVersion || !type) {
      try {
        const body = JSON.parse(raw.content.toString('utf8')) as {
          schema_version?: unknown;
          type?: unknown;
        };
        if (!schemaVersion && typeof body.schema_version === 'string')
          schemaVersion = body.schema_version.slice(0, 16);
        if (!type && typeof body.type === 'string') type = body.type.slice(0, 128);
      } catch {
        // unreadable body: the diagnosis says so through the error
      }
    }
    return {
      messageId: raw.properties.messageId ?? null,
      type,
      schemaVersion,
      attempts,
      firstFailureAt: headerString(h, HEADERS.firstFailureAt) ?? now.toISOString(),
      parkedAt: now.toISOString(),
      reason: outcome.reason,
      errorClass: outcome.errorClass,
      error: truncate(outcome.error),
      correlationId: raw.properties.correlationId ?? null,
      consumer: this.options.consumer,
    };
  }

  async park(
    raw: RawMessage,
    outcome: Extract<Outcome, { kind: 'park' }>,
    attempts: number,
    now = new Date(),
  ): Promise<Diagnosis> {
    const d = this.diagnosis(raw, outcome, attempts, now);
    await this.publishCopy(RETRY_NAMES.parkingExchange, RETRY_NAMES.parkingRoutingKey, raw, {
      ...this.baseHeaders(raw),
      [HEADERS.attempt]: d.attempts,
      [HEADERS.firstFailureAt]: d.firstFailureAt,
      [HEADERS.parkedAt]: d.parkedAt,
      [HEADERS.parkReason]: d.reason,
      [HEADERS.errorClass]: d.errorClass,
      [HEADERS.lastError]: d.error,
      [HEADERS.consumer]: d.consumer,
      ...(d.schemaVersion ? { [HEADERS.schemaVersion]: d.schemaVersion } : {}),
    });
    return d;
  }

  /** Closes the settle channel (after a failed settle: state unknown). Reopened on next use. */
  async reset(): Promise<void> {
    const ch = this.channel;
    this.channel = undefined;
    await ch?.close().catch(() => {});
  }
}
