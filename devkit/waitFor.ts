import { pollUntil } from '../shared/util/async.js';

/**
 * Polls `check` until it returns a truthy value (returned) or the timeout passes (throws with the
 * last value seen). Tests and the lab wait on conditions, never on fixed sleeps.
 */
export async function waitFor<T>(
  check: () => Promise<T> | T,
  options: { timeoutMs?: number; intervalMs?: number; message?: string } = {},
): Promise<NonNullable<T>> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const last: { value?: unknown; error?: unknown } = {};
  const value = await pollUntil(check, { timeoutMs, intervalMs: options.intervalMs ?? 50 }, last);
  if (value !== undefined) return value;
  const detail = last.error
    ? `last error: ${(last.error as Error).message}`
    : `last value: ${JSON.stringify(last.value)}`;
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${options.message ?? 'condition'} (${detail})`,
  );
}
