import type { ConfirmChannel } from 'amqplib';
import { type Envelope, encodeEnvelope } from '../../envelope/envelope.js';
import type { Publisher, PublishOutcome, RouteLoss } from '../../port/types.js';
import type { ConfirmedChannel, ConfirmResult } from './ConfirmedChannel.js';
import { HEADERS, RABBITMQ_DEFAULTS, SCHEMA_VERSION_HEADER } from './constants.js';
import { type LostRoute, type RouteCheck, topicMatches } from './routes.js';

export interface RabbitPublisherOptions {
  exchange: string;
  /** Routing key per envelope; default: the event type (`order.created`). */
  routingKey?: (envelope: Envelope) => string;
  /** Messages awaiting a confirm at once (windowed confirms). */
  window?: number;
  /** A message not confirmed within this time counts as failed (`timeout`). */
  confirmTimeoutMs?: number;
  /** How long `publish` waits for the broker before failing the whole batch (`connection`). */
  connectTimeoutMs?: number;
}

/**
 * Publishes envelopes to an exchange through the backend's confirmed publish primitive:
 * persistent, `mandatory`, AMQP `message_id` = envelope id, `type`, `correlation_id`, schema
 * version header; up to `window` confirms awaited at once. A return (no queue bound for the key)
 * fails that message as `unroutable`. Whatever is unconfirmed when `confirmTimeoutMs` passes has
 * an unknown fate: it fails as `timeout` and the channel is dropped, so late confirms of this batch
 * cannot be mistaken for anything else.
 *
 * With a `RouteCheck`, a message whose routing key needs a declared route to a consumer queue
 * that the broker does not have (seen within the check's interval) is not sent and fails as
 * `route-missing`: a tap bound to `order.#` must not make a lost `inventory.orders` binding look
 * delivered, and holding it back (rather than sending it and failing it after the confirm) sends
 * no copies to the tap on every retry, nor a duplicate to the consumer when the route comes back
 * while the last look still says it is missing.
 */
export class RabbitPublisher implements Publisher {
  private readonly window: number;
  private readonly confirmTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly routingKey: (envelope: Envelope) => string;

  constructor(
    private readonly deps: { channel: ConfirmedChannel; routes?: RouteCheck | undefined },
    private readonly options: RabbitPublisherOptions,
  ) {
    this.window = options.window ?? RABBITMQ_DEFAULTS.publishWindow;
    this.confirmTimeoutMs = options.confirmTimeoutMs ?? RABBITMQ_DEFAULTS.confirmTimeoutMs;
    this.connectTimeoutMs = options.connectTimeoutMs ?? RABBITMQ_DEFAULTS.connectTimeoutMs;
    this.routingKey = options.routingKey ?? ((e) => e.type);
  }

  /** What each loss handed out stands for (to give it back). */
  private readonly handedOut = new WeakMap<RouteLoss, LostRoute>();

  /**
   * The losses the route check recorded for this exchange (docs/design.md §4, "Missing routes"),
   * as event types: the routing key is the event type, unless `routingKey` says otherwise (then
   * every type is counted in).
   */
  takeRouteLosses(): RouteLoss[] {
    const lost = this.deps.routes?.takeLosses(this.options.exchange) ?? [];
    return lost.map((l) => {
      const loss: RouteLoss = {
        eventTypes: this.options.routingKey
          ? () => true
          : (eventType) => topicMatches(l.pattern, eventType),
        from: new Date(l.from),
        to: new Date(l.to),
        reason: `no binding ${l.exchange} → ${l.queue} (${l.pattern}) on the broker`,
      };
      this.handedOut.set(loss, l);
      return loss;
    });
  }

  returnRouteLosses(losses: readonly RouteLoss[]): void {
    const back = losses.flatMap((loss) => {
      const l = this.handedOut.get(loss);
      return l ? [l] : [];
    });
    this.deps.routes?.returnLosses(back);
  }

  async ready(timeoutMs = this.connectTimeoutMs): Promise<void> {
    await this.deps.channel.ready(timeoutMs);
  }

  async publish(envelopes: readonly Envelope[]): Promise<PublishOutcome[]> {
    if (envelopes.length === 0) return [];
    let ch: ConfirmChannel;
    try {
      ch = await this.deps.channel.ready(this.connectTimeoutMs);
    } catch (err) {
      const error = (err as Error).message;
      return envelopes.map((e) => ({ id: e.id, ok: false, reason: 'connection', error }));
    }
    const keys = envelopes.map((e) => this.routingKey(e));
    // Looked up before publishing (no I/O while the cached look is fresh).
    const missing = await this.deps.routes
      ?.missingFor(this.options.exchange, new Set(keys))
      .catch(() => undefined);
    const outcomes: (PublishOutcome | undefined)[] = new Array(envelopes.length);
    let timedOut = false;
    // A batch lives on one channel: once it closed, the rest fails at once (`connection`).
    let closed = false;
    let wake: (() => void) | undefined;
    const signal = () => {
      const w = wake;
      wake = undefined;
      w?.();
    };
    const next = () => new Promise<void>((resolve) => (wake = resolve));
    const onClose = () => {
      closed = true;
      signal();
    };
    ch.once('close', onClose);
    const deadline = setTimeout(() => {
      timedOut = true;
      void this.deps.channel.reset();
      signal();
    }, this.confirmTimeoutMs);
    let inFlight = 0;
    let sent = 0;
    let settled = 0;
    try {
      for (let index = 0; index < envelopes.length && !timedOut; index++) {
        while (inFlight >= this.window && !timedOut && !closed) await next();
        if (timedOut) break;
        const envelope = envelopes[index] as Envelope;
        const gone = missing?.get(keys[index] as string);
        if (gone) {
          outcomes[index] = { id: envelope.id, ok: false, reason: 'route-missing', error: gone };
          continue;
        }
        if (closed) {
          outcomes[index] = toOutcome(envelope.id, this.deps.channel.channelFailure());
          continue;
        }
        const { confirmed, written } = this.deps.channel.publish(
          this.options.exchange,
          keys[index] as string,
          encodeEnvelope(envelope),
          {
            contentType: 'application/json',
            contentEncoding: 'utf-8',
            messageId: envelope.id,
            type: envelope.type,
            correlationId: envelope.correlation_id,
            appId: envelope.producer,
            timestamp: Math.floor(Date.parse(envelope.occurred_at) / 1000),
            headers: {
              [SCHEMA_VERSION_HEADER]: envelope.schema_version,
              // the original route, kept by every retry and park copy (diagnoses)
              [HEADERS.originExchange]: this.options.exchange,
              [HEADERS.originRoutingKey]: keys[index] as string,
            },
          },
          { on: ch },
        );
        inFlight++;
        sent++;
        void confirmed.then((result) => {
          inFlight--;
          settled++;
          if (!timedOut) outcomes[index] = toOutcome(envelope.id, result);
          signal();
        });
        // Socket buffer full: wait for drain (or the deadline, or the close) before writing more.
        await Promise.race([written, next()]);
      }
      while (!timedOut && settled < sent) await next();
    } finally {
      clearTimeout(deadline);
      ch.removeListener('close', onClose);
    }
    return envelopes.map((e, i) => {
      const outcome = outcomes[i];
      return (
        outcome ?? {
          id: e.id,
          ok: false,
          reason: 'timeout',
          error: `no confirm within ${this.confirmTimeoutMs} ms`,
        }
      );
    });
  }

  /** The connection is shared and closed by its owner; nothing to release here. */
  async close(): Promise<void> {}
}

function toOutcome(id: string, result: ConfirmResult): PublishOutcome {
  return result.ok
    ? { id, ok: true }
    : { id, ok: false, reason: result.reason, error: result.error };
}
