import { setTimeout as sleep } from 'node:timers/promises';

export { sleep };

/**
 * Races `promise` against a timer. On timeout rejects with `makeError()`; if the promise settles
 * later with a value, `onLate(value)` disposes of it (so a late channel or client is not leaked).
 */
export function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  makeError: () => Error,
  onLate?: (value: T) => void,
): Promise<T> {
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise.then((value) => {
      if (timedOut) onLate?.(value);
      return value;
    }),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timedOut = true;
        reject(makeError());
      }, ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Exponential backoff with full jitter: a random delay in [base·2^(n-1)/2, base·2^(n-1)], capped. */
export function backoffDelay(
  attempt: number,
  baseMs: number,
  maxMs: number,
  random = Math.random,
): number {
  const exp = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(exp / 2 + random() * (exp / 2));
}
