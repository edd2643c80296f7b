import type { Diagnosis } from './types.js';

/**
 * The parking lot as operators see it, whatever the transport: read diagnoses, move selected
 * messages back. Never automatic.
 */
export interface ParkedEntry {
  diagnosis: Diagnosis;
  /** Parked by the consumer (with its diagnosis) or dead-lettered by the broker itself. */
  via: 'consumer' | 'broker';
}

export interface RedriveSelection {
  types?: string[];
  /** Matches the diagnosis' error class or park reason (`transient`, `permanent`, `exhausted`, …). */
  errorClasses?: string[];
  /** Parked at or after / before. */
  since?: Date;
  until?: Date;
  ids?: string[];
}

export interface RedriveOptions {
  /** Messages per second at most. */
  rate?: number;
  dryRun?: boolean;
  onMoved?: (id: string) => void;
}

export interface RedriveResult {
  scanned: number;
  matched: number;
  moved: string[];
  dryRun: boolean;
}

export interface ParkingLot {
  list(limit?: number): Promise<ParkedEntry[]>;
  redrive(selection: RedriveSelection, options?: RedriveOptions): Promise<RedriveResult>;
}

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
