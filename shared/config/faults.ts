import { AsyncLocalStorage } from 'node:async_hooks';
import { z } from 'zod';
import { ConfigError, InjectedFaultError } from './errors.js';

/**
 * Fault points. `FAULTS="point:action,…"` with action `throw` (an error at that point) or `exit`
 * (the process dies at once with SIGKILL, as if the machine lost power: no finally blocks, no
 * flush, no ack). With `FAULTS` unset and no `FaultScope` armed, `fault()` is two comparisons.
 * The grammar ({@link faultSpecSchema}) is the `FAULTS` field of the configuration schema
 * (`shared/config/env.ts`), so a bad spec fails `loadEnv()` naming `FAULTS`.
 */
export const FAULT_POINTS = [
  'order.after-outbox-insert',
  'relay.after-publish',
  'reserve.after-commit',
  'reserve.after-retry-publish',
] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];
export const FAULT_ACTIONS = ['throw', 'exit'] as const;
export type FaultAction = (typeof FAULT_ACTIONS)[number];
export type FaultSpec = ReadonlyMap<FaultPoint, FaultAction>;

const isFaultPoint = (s: string): s is FaultPoint =>
  (FAULT_POINTS as readonly string[]).includes(s);
const isFaultAction = (s: string): s is FaultAction =>
  (FAULT_ACTIONS as readonly string[]).includes(s);

/** `point:action,…` → the armed points; every unknown point or action is an issue naming it. */
export const faultSpecSchema = z.string().transform((spec, ctx): FaultSpec => {
  const faults = new Map<FaultPoint, FaultAction>();
  for (const part of spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [point = '', action = ''] = part.split(':').map((s) => s.trim());
    if (!isFaultPoint(point)) {
      ctx.issues.push({
        code: 'custom',
        input: spec,
        message: `unknown fault point "${point}" (known: ${FAULT_POINTS.join(', ')})`,
      });
    } else if (!isFaultAction(action)) {
      ctx.issues.push({
        code: 'custom',
        input: spec,
        message: `action for ${point} must be ${FAULT_ACTIONS.map((a) => `"${a}"`).join(' or ')}, got "${action}"`,
      });
    } else {
      faults.set(point, action);
    }
  }
  return faults;
});

/** Parses a `FAULTS` spec; a `ConfigError` naming `FAULTS` and the bad point or action. */
export function parseFaults(spec: string | undefined): Map<FaultPoint, FaultAction> {
  const parsed = faultSpecSchema.safeParse(spec ?? '');
  if (!parsed.success) {
    throw new ConfigError(`FAULTS: ${parsed.error.issues.map((i) => i.message).join('; ')}`, {
      cause: parsed.error,
    });
  }
  return new Map(parsed.data);
}

let active = parseFaults(process.env.FAULTS);

/** Points armed in some `FaultScope` (0 → `fault()` stays one comparison). */
let armedInScopes = 0;
const scopes = new AsyncLocalStorage<FaultScope>();

/** One firing of a scoped fault point. */
export interface FaultFiring {
  point: FaultPoint;
  at: number;
}

/**
 * Faults for one piece of work in a process that runs several at once (the comparison lab runs
 * scenarios in parallel): a point armed here fires only for code running inside `run()` (and
 * everything it starts: connections, timers, loops), `times` times, then is inert again, as a
 * process that crashed once and was restarted without `FAULTS`. Scoped faults only `throw`: an
 * `exit` would take every other scope down with it.
 */
export class FaultScope {
  private readonly remaining = new Map<FaultPoint, number>();
  /** Every firing, in order. */
  readonly fired: FaultFiring[] = [];

  /** Arms `point` for its next `times` passes inside this scope. */
  arm(point: FaultPoint, times = 1): void {
    if (!this.remaining.has(point)) armedInScopes++;
    this.remaining.set(point, times);
  }

  /** Disarms one point, or all. */
  disarm(point?: FaultPoint): void {
    for (const p of point ? [point] : [...this.remaining.keys()]) {
      if (this.remaining.delete(p)) armedInScopes--;
    }
  }

  run<T>(fn: () => T): T {
    return scopes.run(this, fn);
  }

  /** True when `point` fires now (and counts it). */
  take(point: FaultPoint): boolean {
    const left = this.remaining.get(point);
    if (left === undefined) return false;
    if (left <= 1) this.disarm(point);
    else this.remaining.set(point, left - 1);
    this.fired.push({ point, at: Date.now() });
    return true;
  }
}

/** Replaces the active faults (tests and the lab); `undefined` re-reads `process.env.FAULTS`. */
export function setFaults(spec: string | undefined): void {
  active = parseFaults(spec ?? process.env.FAULTS);
}

export function fault(point: FaultPoint): void {
  if (active.size === 0 && armedInScopes === 0) return;
  if (armedInScopes > 0 && scopes.getStore()?.take(point)) throw new InjectedFaultError(point);
  const action = active.get(point);
  if (action === 'throw') throw new InjectedFaultError(point);
  if (action === 'exit') {
    process.stderr.write(`FAULT ${point}: exiting now\n`);
    process.kill(process.pid, 'SIGKILL');
  }
}
