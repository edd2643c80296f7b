import type { ParkedEntry, RedriveOptions, RedriveSelection, RedriveSkip } from '../port/types.js';

/** Whether a parked message is in an operator's redrive selection. */
export function matches(p: ParkedEntry, s: RedriveSelection): boolean {
  const d = p.diagnosis;
  if (s.types?.length && !s.types.includes(d.type ?? '')) return false;
  if (
    s.errorClasses?.length &&
    !s.errorClasses.includes(d.errorClass) &&
    !s.errorClasses.includes(d.reason)
  ) {
    return false;
  }
  const parkedAt = Date.parse(d.parkedAt);
  if (s.since && parkedAt < s.since.getTime()) return false;
  if (s.until && parkedAt > s.until.getTime()) return false;
  if (s.ids?.length && !s.ids.includes(d.messageId ?? '')) return false;
  return true;
}

/** Paces calls to at most `rate` per second. */
export function pacer(rate: number | undefined): () => Promise<void> {
  const interval = rate && rate > 0 ? 1000 / rate : 0;
  let next = Date.now();
  return async () => {
    const wait = next - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    next = Math.max(next, Date.now()) + interval;
  };
}

/**
 * Why a matched message is not redriven when it was already redriven `limit` times: the inbox
 * retention (`INBOX_RETENTION_MS`) covers `REDRIVE_LIMIT` park-and-redrive cycles per message, so
 * one more could arrive after its inbox row was deleted and apply its effect twice.
 */
export function redriveLimitReason(limit: number): string {
  return `redrive limit ${limit} reached: the inbox retention covers ${limit} redrives; raise INBOX_RETENTION_MS and REDRIVE_LIMIT together`;
}

/**
 * The skip entry for a parked message at or over the redrive limit, or undefined when it may be
 * redriven (below the limit, or the operator overrode it with `beyondLimit`).
 */
export function overRedriveLimit(
  p: ParkedEntry,
  limit: number,
  options: Pick<RedriveOptions, 'redriveLimit' | 'beyondLimit'> = {},
): RedriveSkip | undefined {
  const max = options.redriveLimit ?? limit;
  const count = p.diagnosis.redriveCount ?? 0;
  if (options.beyondLimit || count < max) return undefined;
  return {
    messageId: p.diagnosis.messageId ?? '(no id)',
    redriveCount: count,
    reason: redriveLimitReason(max),
  };
}
