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

/** What the inbox rule compares, in milliseconds (and how often a message may be redriven). */
export interface InboxRetentionTerms {
  inboxMs: number;
  parkingMs: number;
  maxAgeMs: number;
  redriveWindowMs: number;
  /** How many times one message may be redriven from the parking lot. */
  redriveLimit: number;
}

/**
 * The time during which a message can still come back after it occurred: its retries (until
 * `maxAgeMs`), then, for each redrive allowed, a stay in the parking lot (`parkingMs`), the
 * redrive itself (`redriveWindowMs`) and a fresh retry window (`maxAgeMs`) after which it may be
 * parked again: `maxAgeMs + redriveLimit × (parkingMs + redriveWindowMs + maxAgeMs)`.
 */
export function comebackWindowMs(terms: Omit<InboxRetentionTerms, 'inboxMs'>): number {
  return (
    terms.maxAgeMs + terms.redriveLimit * (terms.parkingMs + terms.redriveWindowMs + terms.maxAgeMs)
  );
}

/**
 * The inbox row is what makes a redelivery a duplicate, so it must outlive every way a message
 * can come back ({@link comebackWindowMs}): retries, and every park-and-redrive cycle allowed,
 * each a parking stay, a redrive that may still take `redriveWindowMs` to be settled, and a
 * fresh retry window. Strictly longer: at exactly the sum the row may already be gone when the
 * copy arrives.
 */
export function inboxRetentionRule(
  terms: InboxRetentionTerms,
  names: Record<Exclude<keyof InboxRetentionTerms, 'inboxMs'>, string>,
): string | undefined {
  const floor = comebackWindowMs(terms);
  if (terms.inboxMs > floor) return undefined;
  return (
    `must exceed ${names.maxAgeMs} + ${names.redriveLimit} × (${names.parkingMs} + ` +
    `${names.redriveWindowMs} + ${names.maxAgeMs}) ` +
    `(${terms.maxAgeMs} + ${terms.redriveLimit} × (${terms.parkingMs} + ${terms.redriveWindowMs} + ` +
    `${terms.maxAgeMs}) = ${floor} ms): a message redriven from parking would otherwise no ` +
    'longer be recognised as a duplicate'
  );
}

/** What the transaction bounds rule compares, in milliseconds. */
export interface TransactionBoundsTerms {
  lockTimeoutMs: number;
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
  functionTimeoutMs: number;
  publishTimeoutMs: number;
}

/**
 * The bounds of every transaction (`shared/db/transactionBounds.ts`): a lock wait is part of a
 * statement, so `lock ≤ statement`; a statement must end before the function times out, or the
 * timeout, not the bound, ends it (`statement < function timeout`); the relay sits idle in its
 * transaction while it waits for broker confirms, so `idle > publish timeout` (in a Lambda
 * invocation every bound is also capped by the invocation's deadline). Returns the field to
 * change and the predicate that failed, or undefined.
 */
export function transactionBoundsRule(
  t: TransactionBoundsTerms,
  names: Record<keyof TransactionBoundsTerms, string>,
): { field: keyof TransactionBoundsTerms; message: string } | undefined {
  if (t.lockTimeoutMs > t.statementTimeoutMs) {
    return {
      field: 'lockTimeoutMs',
      message: `${t.lockTimeoutMs} must be at most ${names.statementTimeoutMs} (${t.statementTimeoutMs}): a lock wait is part of a statement`,
    };
  }
  if (t.statementTimeoutMs >= t.functionTimeoutMs) {
    return {
      field: 'statementTimeoutMs',
      message: `${t.statementTimeoutMs} must be below ${names.functionTimeoutMs} (${t.functionTimeoutMs}): a statement must end before the function times out`,
    };
  }
  if (t.idleInTransactionTimeoutMs <= t.publishTimeoutMs) {
    return {
      field: 'idleInTransactionTimeoutMs',
      message: `${t.idleInTransactionTimeoutMs} must exceed ${names.publishTimeoutMs} (${t.publishTimeoutMs}): the relay waits for broker confirms inside its transaction`,
    };
  }
  return undefined;
}
