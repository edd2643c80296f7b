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

/**
 * Polls `check` every `intervalMs` until it returns a truthy value (returned) or `timeoutMs` passes
 * (`undefined`, with the last value and error seen in `last`). Errors thrown by `check` count as
 * "not yet". The one polling loop of the code base: `devkit/waitFor` builds its test helper on it.
 */
export async function pollUntil<T>(
  check: () => Promise<T> | T,
  options: { timeoutMs: number; intervalMs?: number },
  last: { value?: unknown; error?: unknown } = {},
): Promise<NonNullable<T> | undefined> {
  const deadline = Date.now() + options.timeoutMs;
  while (Date.now() < deadline) {
    try {
      last.value = await check();
      last.error = undefined;
      if (last.value) return last.value as NonNullable<T>;
    } catch (err) {
      last.error = err;
    }
    await sleep(options.intervalMs ?? 50);
  }
  return undefined;
}
