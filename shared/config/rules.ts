/**
 * The rules between settings: each holds or fails on its own, whatever the settings are called
 * where they come from. The environment schema (`env.ts`), the SQS trigger emulation and the CDK
 * app all check them through these functions, naming their own fields in the message.
 *
 * Each returns `undefined` when the rule holds, otherwise the predicate that failed (to be put
 * after the subject's name and value, e.g. `SQS_VISIBILITY_TIMEOUT_S: 30 s ` + predicate).
 */

/** AWS's rule for SQS event sources: visibility timeout ≥ 6 × the function timeout. */
export const VISIBILITY_TIMEOUT_FACTOR = 6;

export function visibilityTimeoutRule(
  visibilityTimeoutSeconds: number,
  functionTimeoutMs: number,
  functionTimeoutName = 'the function timeout',
): string | undefined {
  // compared in whole milliseconds, no fractions of a second to round
  if (visibilityTimeoutSeconds * 1000 >= VISIBILITY_TIMEOUT_FACTOR * functionTimeoutMs) {
    return undefined;
  }
  const minimumSeconds = (VISIBILITY_TIMEOUT_FACTOR * functionTimeoutMs) / 1000;
  return (
    `must be at least ${VISIBILITY_TIMEOUT_FACTOR} × ${functionTimeoutName} ` +
    `(${VISIBILITY_TIMEOUT_FACTOR} × ${functionTimeoutMs / 1000} s = ${minimumSeconds} s): ` +
    'a record still being processed would otherwise be delivered again'
  );
}

/** What the inbox rule compares, in milliseconds. */
export interface InboxRetentionTerms {
  inboxMs: number;
  parkingMs: number;
  maxAgeMs: number;
  redriveWindowMs: number;
}

/**
 * The inbox row is what makes a redelivery a duplicate, so it must outlive every way a message
 * can come back: retries (until `maxAgeMs` after the event occurred), then the parking lot
 * (`parkingMs`), then a redrive at the very end of that retention, which may still take
 * `redriveWindowMs` to be settled. Strictly longer: at exactly the sum the row may already be
 * gone when the copy arrives.
 */
export function inboxRetentionRule(
  terms: InboxRetentionTerms,
  names: Record<Exclude<keyof InboxRetentionTerms, 'inboxMs'>, string>,
): string | undefined {
  const floor = terms.parkingMs + terms.maxAgeMs + terms.redriveWindowMs;
  if (terms.inboxMs > floor) return undefined;
  return (
    `must exceed ${names.parkingMs} + ${names.maxAgeMs} + ${names.redriveWindowMs} ` +
    `(${terms.parkingMs} + ${terms.maxAgeMs} + ${terms.redriveWindowMs} = ${floor} ms): ` +
    'a message redriven from parking would otherwise no longer be recognised as a duplicate'
  );
}
