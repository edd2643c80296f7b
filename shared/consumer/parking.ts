import type { ParkedEntry, RedriveSelection } from '../transport/types.js';

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
