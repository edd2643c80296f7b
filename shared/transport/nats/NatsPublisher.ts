import { JetStreamApiError } from '@nats-io/jetstream';
import { NoRespondersError, RequestError, TimeoutError } from '@nats-io/transport-node';
import { type Envelope, encodeEnvelope } from '../../envelope/envelope.js';
import type { Publisher, PublishFailureReason, PublishOutcome } from '../../port/types.js';
import { envelopeHeaders } from './messages.js';
import type { NatsClient } from './NatsClient.js';

/**
 * Why a JetStream publish failed. No responders means no stream takes the subject (JetStream
 * answers for every subject a stream has): unroutable. A JetStream API error is the stream
 * refusing the message (full, a failed store): nacked.
 */
export function natsFailureReason(err: unknown): PublishFailureReason {
  const cause = (err as Error | undefined)?.cause;
  if (
    err instanceof NoRespondersError ||
    cause instanceof NoRespondersError ||
    (cause instanceof RequestError && cause.isNoResponders())
  ) {
    return 'unroutable';
  }
  if (err instanceof TimeoutError || cause instanceof TimeoutError) return 'timeout';
  if (err instanceof JetStreamApiError) return 'nacked';
  // a closed, draining or lost connection, or anything else: the message's fate is unknown
  return 'connection';
}

export interface NatsPublisherOptions {
  /** The subject root of the stream (`<prefix>orders`): a message goes to `<root>.<event type>`. */
  subjectRoot: string;
  /** Publishes awaiting their ack at once. */
  window: number;
  timeoutMs: number;
  readyTimeoutMs: number;
}

/**
 * Publishes envelopes to a JetStream stream. A message counts only once the stream's publish
 * ack arrived: the relay's confirm. The message id (`Nats-Msg-Id`) is the envelope id, so a
 * second publish of one message within the duplicate window is acknowledged as a duplicate and
 * not stored again: that is a confirm too (the stream has it). The publishes of a window are in
 * flight together on the one connection, which keeps their order.
 */
export class NatsPublisher implements Publisher {
  constructor(
    private readonly client: NatsClient,
    private readonly options: NatsPublisherOptions,
  ) {}

  async publish(envelopes: readonly Envelope[]): Promise<PublishOutcome[]> {
    let js: Awaited<ReturnType<NatsClient['js']>>;
    try {
      js = await this.client.js();
    } catch (err) {
      const error = `NATS not reachable: ${(err as Error).message}`;
      return envelopes.map((e) => ({ id: e.id, ok: false, reason: 'connection', error }));
    }
    const outcomes: PublishOutcome[] = [];
    for (let i = 0; i < envelopes.length; i += this.options.window) {
      const window = envelopes.slice(i, i + this.options.window);
      outcomes.push(...(await Promise.all(window.map((e) => this.publishOne(js, e)))));
    }
    return outcomes;
  }

  private async publishOne(
    js: Awaited<ReturnType<NatsClient['js']>>,
    e: Envelope,
  ): Promise<PublishOutcome> {
    const subject = `${this.options.subjectRoot}.${e.type}`;
    try {
      const ack = await js.publish(subject, encodeEnvelope(e), {
        msgID: e.id,
        headers: envelopeHeaders(e),
        timeout: this.options.timeoutMs,
      });
      return ack.duplicate ? { id: e.id, ok: true, duplicate: true } : { id: e.id, ok: true };
    } catch (err) {
      const reason = natsFailureReason(err);
      const error =
        reason === 'unroutable'
          ? `no stream takes subject "${subject}"`
          : `${(err as Error).name}: ${(err as Error).message}`;
      return { id: e.id, ok: false, reason, error };
    }
  }

  async ready(timeoutMs = this.options.readyTimeoutMs): Promise<void> {
    await this.client.ready(timeoutMs);
  }

  /** The connection is the backend's: closed with it. */
  async close(): Promise<void> {}
}
