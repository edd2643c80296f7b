import { decideRetry, type RetryBudget } from '../config/budget.js';
import type { InboundMessage, Outcome } from '../port/types.js';
import { classifyError, isInfrastructureError, shortError } from './classify.js';

/**
 * Why a message was not applied: an error raised while processing it, or `'deferred'` when it
 * cannot be applied yet (an earlier event of the same aggregate has not been applied).
 */
export type Setback = { error: unknown } | 'deferred';

/** The outcome of a message that was not applied: never an ack. */
export type RetryOutcome = Exclude<Outcome, { kind: 'ack' }>;

/** The diagnosis text of a deferral. */
export const DEFERRED_ERROR = 'predecessor not applied yet';

/**
 * Turns a failure or a deferral into a `retry` or a `park` outcome, within the retry budget:
 * - a permanent error (see `classifyError`) is parked at once, reason `permanent`;
 * - a transient or unknown error is retried on the budget's ladder until `maxAttempts` retries
 *   were made (then parked `exhausted`) or the next delay would take the message past `maxAgeMs`
 *   (then parked `max_age`); `infrastructure` says the database itself is unreachable;
 * - a deferral is retried whatever its attempt count, until it is too old (then parked
 *   `missing_predecessor`).
 *
 * The age is measured from the envelope's `occurred_at` when the message could be decoded, and is
 * zero otherwise (such a message is permanent anyway, or retried on attempts alone). A redriven
 * message's window starts again at its last redrive: after a long outage it gets the whole ladder
 * again instead of being parked at once.
 */
export class RetryPolicy {
  constructor(
    readonly budget: RetryBudget,
    private readonly now: () => number = Date.now,
  ) {}

  outcome(
    message: Pick<InboundMessage, 'attempt' | 'redrive'>,
    occurredAt: string | undefined,
    setback: Setback,
  ): RetryOutcome {
    if (setback === 'deferred') {
      return this.retryOrPark(message, occurredAt, 'deferred', DEFERRED_ERROR, false);
    }
    const errorClass = classifyError(setback.error);
    const error = shortError(setback.error);
    if (errorClass === 'permanent') return { kind: 'park', reason: 'permanent', errorClass, error };
    return this.retryOrPark(
      message,
      occurredAt,
      errorClass,
      error,
      isInfrastructureError(setback.error),
    );
  }

  private retryOrPark(
    message: Pick<InboundMessage, 'attempt' | 'redrive'>,
    occurredAt: string | undefined,
    errorClass: 'transient' | 'unknown' | 'deferred',
    error: string,
    infrastructure: boolean,
  ): RetryOutcome {
    const now = this.now();
    const age = now - windowStart(occurredAt, message.redrive?.lastAt, now);
    const decision = decideRetry(this.budget, message.attempt, age, {
      deferral: errorClass === 'deferred',
    });
    if (decision.retry) {
      return {
        kind: 'retry',
        delayMs: decision.delayMs,
        attempt: decision.attempt,
        errorClass,
        error,
        infrastructure,
      };
    }
    const reason = errorClass === 'deferred' ? 'missing_predecessor' : decision.reason;
    return { kind: 'park', reason, errorClass, error };
  }
}

/** When a message's retry window started: its last redrive, else `occurred_at`, else now. */
export function windowStart(
  occurredAt: string | undefined,
  redrivenAt: string | undefined,
  now: number,
): number {
  const starts = [occurredAt, redrivenAt]
    .map((t) => (t === undefined ? Number.NaN : Date.parse(t)))
    .filter((t) => Number.isFinite(t));
  return starts.length === 0 ? now : Math.max(...starts);
}
