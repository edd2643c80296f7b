/**
 * Fault points (DESIGN §10). `FAULTS="point:action,…"` with action `throw` (an error at that point)
 * or `exit` (the process dies at once with SIGKILL, as if the machine lost power: no finally
 * blocks, no flush, no ack). With `FAULTS` unset `fault()` is one Map lookup on an empty map.
 */
export const FAULT_POINTS = [
  'order.after-outbox-insert',
  'relay.after-publish',
  'reserve.after-commit',
  'reserve.after-retry-publish',
] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];
export type FaultAction = 'throw' | 'exit';

export class InjectedFaultError extends Error {
  readonly point: FaultPoint;
  constructor(point: FaultPoint) {
    super(`injected fault at ${point}`);
    this.name = 'InjectedFaultError';
    this.point = point;
  }
}

export function parseFaults(spec: string | undefined): Map<FaultPoint, FaultAction> {
  const faults = new Map<FaultPoint, FaultAction>();
  for (const part of (spec ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [point, action] = part.split(':');
    if (!(FAULT_POINTS as readonly string[]).includes(point ?? '')) {
      throw new Error(`FAULTS: unknown fault point "${point}" (known: ${FAULT_POINTS.join(', ')})`);
    }
    if (action !== 'throw' && action !== 'exit') {
      throw new Error(`FAULTS: action for ${point} must be "throw" or "exit", got "${action}"`);
    }
    faults.set(point as FaultPoint, action);
  }
  return faults;
}

let active = parseFaults(process.env.FAULTS);

/** Replaces the active faults (tests and the lab); `undefined` re-reads `process.env.FAULTS`. */
export function setFaults(spec: string | undefined): void {
  active = parseFaults(spec ?? process.env.FAULTS);
}

export function fault(point: FaultPoint): void {
  if (active.size === 0) return;
  const action = active.get(point);
  if (action === 'throw') throw new InjectedFaultError(point);
  if (action === 'exit') {
    process.stderr.write(`FAULT ${point}: exiting now\n`);
    process.kill(process.pid, 'SIGKILL');
  }
}
