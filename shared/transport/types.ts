import type { Envelope } from '../envelope/envelope.js';

/**
 * The transport port, publishing side (DESIGN §3). Semantics every backend MUST keep:
 * - `publish` resolves with exactly one outcome per envelope, in the same order, and never rejects
 *   for a per-message problem;
 * - `ok: true` only once the broker has taken responsibility for the message (RabbitMQ: publisher
 *   confirm and no `basic.return`; SQS: a successful entry in the batch response);
 * - a message whose fate is unknown (channel died, confirm timed out) is a failure: the caller
 *   publishes it again later, producing at worst a duplicate with the same id;
 * - the message id on the wire is the envelope id, so consumers can deduplicate.
 */
export type PublishFailureReason = 'unroutable' | 'nacked' | 'throttled' | 'timeout' | 'connection';

export type PublishOutcome =
  | { id: string; ok: true }
  | { id: string; ok: false; reason: PublishFailureReason; error: string };

export interface Publisher {
  publish(envelopes: readonly Envelope[]): Promise<PublishOutcome[]>;
  /**
   * Resolves when the publisher can reach its broker, or rejects with `TransportUnavailableError`
   * within `timeoutMs`. Callers check this before taking work they would only fail.
   */
  ready(timeoutMs?: number): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
}
