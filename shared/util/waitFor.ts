import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls `check` until it returns a truthy value (returned) or the timeout passes (throws with the
 * last value seen). Tests and the lab wait on conditions, never on fixed sleeps.
 */
export async function waitFor<T>(
  check: () => Promise<T> | T,
  options: { timeoutMs?: number; intervalMs?: number; message?: string } = {},
): Promise<NonNullable<T>> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const intervalMs = options.intervalMs ?? 50;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      last = await check();
      lastError = undefined;
      if (last) return last as NonNullable<T>;
    } catch (err) {
      lastError = err;
    }
    await sleep(intervalMs);
  }
  const detail = lastError
    ? `last error: ${(lastError as Error).message}`
    : `last value: ${JSON.stringify(last)}`;
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${options.message ?? 'condition'} (${detail})`,
  );
}
