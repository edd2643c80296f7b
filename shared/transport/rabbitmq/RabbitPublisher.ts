import type { ConfirmChannel } from 'amqplib';
import { SCHEMA_VERSION_HEADER } from '../../config/constants.js';
import { type Envelope, encodeEnvelope } from '../../envelope/envelope.js';
import type { Logger } from '../../logger.js';
import { TransportUnavailableError } from '../errors.js';
import type { Publisher, PublishFailureReason, PublishOutcome } from '../types.js';
import type { RabbitConnection } from './RabbitConnection.js';

export interface RabbitPublisherOptions {
  exchange: string;
  /** Routing key per envelope; default: the event type (`order.created`). */
  routingKey?: (envelope: Envelope) => string;
  /** Messages awaiting a confirm at once (windowed confirms). Default 1000. */
  window?: number;
  /** A message not confirmed within this time counts as failed (`timeout`). Default 10 s. */
  confirmTimeoutMs?: number;
  /** How long `publish` waits for the broker before failing the whole batch (`connection`). */
  connectTimeoutMs?: number;
}

interface Pending {
  index: number;
  id: string;
}

/**
 * Publishes envelopes to an exchange on a confirm channel: persistent, `mandatory`, AMQP
 * `message_id` = envelope id, `type`, `correlation_id`, schema version header. A `basic.return`
 * (no queue bound for the key) fails that message as `unroutable`: RabbitMQ sends the return before
 * the confirm of the same message, so the confirm callback already knows.
 */
export class RabbitPublisher implements Publisher {
  private readonly window: number;
  private readonly confirmTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly routingKey: (envelope: Envelope) => string;

  constructor(
    private readonly deps: { connection: RabbitConnection; logger?: Logger },
    private readonly options: RabbitPublisherOptions,
  ) {
    this.window = options.window ?? 1_000;
    this.confirmTimeoutMs = options.confirmTimeoutMs ?? 10_000;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 5_000;
    this.routingKey = options.routingKey ?? ((e) => e.type);
  }

  async ready(timeoutMs = this.connectTimeoutMs): Promise<void> {
    await this.deps.connection.confirmChannel(timeoutMs);
  }

  async publish(envelopes: readonly Envelope[]): Promise<PublishOutcome[]> {
    if (envelopes.length === 0) return [];
    let ch: ConfirmChannel;
    try {
      ch = await this.deps.connection.confirmChannel(this.connectTimeoutMs);
    } catch (err) {
      const error = err instanceof TransportUnavailableError ? err.message : String(err);
      return envelopes.map((e) => ({ id: e.id, ok: false, reason: 'connection', error }));
    }
    const outcomes: (PublishOutcome | undefined)[] = new Array(envelopes.length);
    let settledCount = 0;
    let inFlight = 0;
    let wake: (() => void) | undefined;
    const signal = () => {
      const w = wake;
      wake = undefined;
      w?.();
    };
    const settle = (p: Pending, outcome: PublishOutcome) => {
      if (outcomes[p.index]) return; // already timed out
      outcomes[p.index] = outcome;
      settledCount++;
      inFlight--;
      signal();
    };
    let closed = false;
    const onClose = () => {
      closed = true;
      signal();
    };
    ch.once('close', onClose);
    const onDrain = () => signal();
    ch.on('drain', onDrain);
    const deadline = setTimeout(() => {
      // Whatever is unconfirmed now has an unknown fate: fail it, and drop the channel so late
      // confirms of this batch cannot be mistaken for anything else.
      for (let i = 0; i < envelopes.length; i++) {
        const e = envelopes[i] as Envelope;
        if (!outcomes[i]) {
          outcomes[i] = {
            id: e.id,
            ok: false,
            reason: 'timeout',
            error: `no confirm within ${this.confirmTimeoutMs} ms`,
          };
          settledCount++;
        }
      }
      void this.deps.connection.resetChannel();
      signal();
    }, this.confirmTimeoutMs);
    const waitForSignal = () => new Promise<void>((resolve) => (wake = resolve));

    try {
      for (let index = 0; index < envelopes.length; index++) {
        const envelope = envelopes[index] as Envelope;
        while (inFlight >= this.window && !closed && settledCount < envelopes.length) {
          await waitForSignal();
        }
        if (outcomes[index]) continue; // timed out before it was even sent
        if (closed) {
          outcomes[index] = this.channelFailure(ch, envelope.id);
          settledCount++;
          continue;
        }
        const pending: Pending = { index, id: envelope.id };
        inFlight++;
        let writable: boolean;
        try {
          writable = ch.publish(
            this.options.exchange,
            this.routingKey(envelope),
            encodeEnvelope(envelope),
            {
              persistent: true,
              mandatory: true,
              contentType: 'application/json',
              contentEncoding: 'utf-8',
              messageId: envelope.id,
              type: envelope.type,
              correlationId: envelope.correlation_id,
              appId: envelope.producer,
              timestamp: Math.floor(Date.parse(envelope.occurred_at) / 1000),
              headers: { [SCHEMA_VERSION_HEADER]: envelope.schema_version },
            },
            (err: unknown) => {
              const returnedWhy = this.deps.connection.takeReturn(ch, envelope.id);
              if (err) {
                // amqplib fails unconfirmed callbacks with 'channel closed' when the channel
                // dies, and with 'message nacked' for a basic.nack from the broker.
                const nacked = (err as Error).message === 'message nacked' && !closed;
                settle(
                  pending,
                  nacked
                    ? {
                        id: envelope.id,
                        ok: false,
                        reason: 'nacked',
                        error: 'broker nacked the message',
                      }
                    : this.channelFailure(ch, envelope.id),
                );
              } else if (returnedWhy !== undefined) {
                settle(pending, {
                  id: envelope.id,
                  ok: false,
                  reason: 'unroutable',
                  error: `returned: ${returnedWhy}`,
                });
              } else {
                settle(pending, { id: envelope.id, ok: true });
              }
            },
          );
        } catch (err) {
          // The channel was already closed when we published (IllegalOperationError).
          inFlight--;
          outcomes[index] = this.channelFailure(ch, envelope.id, (err as Error).message);
          settledCount++;
          continue;
        }
        if (!writable) {
          // Socket buffer full: wait for drain (or close) before writing more.
          await waitForSignal();
        }
      }
      while (settledCount < envelopes.length) {
        if (closed) {
          // amqplib fails every unconfirmed callback on close; this is a backstop.
          for (let i = 0; i < envelopes.length; i++) {
            if (!outcomes[i]) {
              outcomes[i] = this.channelFailure(ch, (envelopes[i] as Envelope).id);
              settledCount++;
            }
          }
          break;
        }
        await waitForSignal();
      }
    } finally {
      clearTimeout(deadline);
      ch.removeListener('close', onClose);
      ch.removeListener('drain', onDrain);
    }
    return outcomes as PublishOutcome[];
  }

  private channelFailure(ch: ConfirmChannel, id: string, detail?: string): PublishOutcome {
    const why =
      this.deps.connection.closeReason(ch) ??
      detail ??
      'channel closed before the broker confirmed';
    // A channel closed by the broker with 404 means the exchange does not exist: nothing can route.
    const reason: PublishFailureReason = /NOT_FOUND|404/.test(why) ? 'unroutable' : 'connection';
    return { id, ok: false, reason, error: why };
  }

  /** The connection is shared and closed by its owner; nothing to release here. */
  async close(): Promise<void> {}
}
