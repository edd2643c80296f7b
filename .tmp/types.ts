/**
 * The consuming side of the transport port (DESIGN §3), transport-neutral: a transport turns what
 * it received into `InboundMessage`s, the use case returns one `Outcome` per message, and the
 * transport settles each outcome natively (ack / retry later / park).
 */
export interface InboundMessage {
  /** The transport's message id (AMQP `message_id`, SQS message attribute); must equal the envelope id. */
  messageId: string | undefined;
  body: Buffer;
  /** Retries already made (0 on the first delivery), as carried by the transport (`x-retry-attempt`). */
  attempt: number;
  /** The broker says it delivered this message before (AMQP `redelivered`). */
  redelivered: boolean;
  /** When this message first failed (ISO), carried across retries. */
  firstFailureAt?: string | undefined;
  /** Event type as the transport saw it (AMQP `type`), for diagnoses of unreadable bodies. */
  type?: string | undefined;
  correlationId?: string | undefined;
}

/**
 * How a failure is classified (issue #3 §1):
 * - `transient`: may succeed later (connection loss, serialization failure, deadlock, timeout);
 * - `permanent`: will never succeed (invalid JSON, missing id, schema violation, unknown version);
 * - `unknown`: anything else; retried within the budget, then parked.
 * Business outcomes (out of stock) are results, not failures.
 */
export type ErrorClass = 'transient' | 'permanent' | 'unknown';

/** Why a message is parked. */
export type ParkReason = 'permanent' | 'exhausted' | 'max_age' | 'missing_predecessor';

export type AckResult = 'reserved' | 'rejected' | 'released' | 'duplicate' | 'stale' | 'noop';

export type Outcome =
  | { kind: 'ack'; result: AckResult }
  | {
      kind: 'retry';
      /** Delay before the next attempt (a ladder step). */
      delayMs: number;
      /** The attempt number the copy will carry. */
      attempt: number;
      errorClass: ErrorClass | 'deferred';
      error: string;
      /** The database (not the message) is unreachable: a trigger handler should fail the batch. */
      infrastructure: boolean;
    }
  | { kind: 'park'; reason: ParkReason; errorClass: ErrorClass | 'deferred'; error: string };

/** What an operator reads about a parked message. Never the payload, never secrets. */
export interface Diagnosis {
  messageId: string | null;
  type: string | null;
  schemaVersion: string | null;
  attempts: number;
  firstFailureAt: string;
  parkedAt: string;
  reason: ParkReason;
  errorClass: string;
  error: string;
  correlationId: string | null;
  consumer: string;
}
