import { setTimeout as sleep } from 'node:timers/promises';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { backlog, drained, windowStats } from './e2eStats.js';
import { fixedRateLoad, round1 } from './load.js';

/** One step of the step-up search. */
export interface Step {
  rate: number;
  achieved: number;
  failed: number;
  missed: number;
  backlogSlopePerS: number;
  backlogAtEnd: number;
  e2eP99Ms: number;
  sustainable: boolean;
  why?: string;
  errors?: Record<string, number>;
}

export interface SearchSettings {
  from: number;
  step: number;
  max: number;
  /** Seconds per step. */
  seconds: number;
}

/** Least-squares slope (units per second) of (t ms, value) samples. */
export function slopePerSecond(samples: readonly [number, number][]): number {
  const n = samples.length;
  if (n < 2) return 0;
  const mt = samples.reduce((s, [t]) => s + t, 0) / n;
  const mv = samples.reduce((s, [, v]) => s + v, 0) / n;
  let num = 0;
  let den = 0;
  for (const [t, v] of samples) {
    num += (t - mt) * (v - mv);
    den += (t - mt) ** 2;
  }
  return den === 0 ? 0 : (num / den) * 1000;
}

/**
 * The step-up search: the API offered `from`, `from + step`, … orders per second for `seconds`
 * each, until a step is not sustainable (requests failed, the backlog grew or did not drain).
 */
export async function stepUpSearch(c: {
  db: PgDatabase;
  apiUrl: string;
  search: SearchSettings;
  body: (i: number) => string;
  say: (line: string) => void;
}): Promise<Step[]> {
  const { db, search } = c;
  const steps: Step[] = [];
  for (let rate = search.from; rate <= search.max; rate += search.step) {
    const samples: [number, number][] = [];
    const t0 = Date.now();
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        samples.push([Date.now() - t0, (await backlog(db)).pending]);
        await sleep(1000);
      }
    })();
    const from = new Date();
    const r = await fixedRateLoad({
      url: c.apiUrl,
      rate,
      durationMs: search.seconds * 1000,
      body: c.body,
    });
    const to = new Date();
    sampling = false;
    await sampler;
    const end = (await backlog(db)).pending;
    const half = samples.filter(([t]) => t >= search.seconds * 500);
    const slope = round1(slopePerSecond(half));
    const drainedAfter = await drained(db, 120_000);
    const w = await windowStats(db, from, to);
    const expected = Math.round(rate * search.seconds);
    const why =
      r.failed + r.missed > 0
        ? `${r.failed + r.missed} requests failed or not sent`
        : r.ok < 0.97 * expected
          ? `API answered ${r.ok} of ${expected}`
          : slope > Math.max(5, 0.02 * rate)
            ? `backlog grew ${slope}/s`
            : end > 2 * rate
              ? `backlog ${end} (> 2 s of orders) at the end`
              : !drainedAfter
                ? 'backlog not drained in 120 s'
                : undefined;
    const step: Step = {
      rate,
      achieved: r.achieved,
      failed: r.failed,
      missed: r.missed,
      backlogSlopePerS: slope,
      backlogAtEnd: end,
      e2eP99Ms: w.e2eMs.p99,
      sustainable: !why,
      ...(why ? { why } : {}),
      ...(r.errors ? { errors: r.errors } : {}),
    };
    steps.push(step);
    c.say(
      `  step ${rate}/s: answered ${r.achieved}/s, backlog slope ${slope}/s, at end ${end}, e2e p99 ${w.e2eMs.p99} ms → ${why ? `not sustainable (${why}${r.errors ? `: ${JSON.stringify(r.errors)}` : ''})` : 'sustainable'}`,
    );
    if (why) break;
  }
  return steps;
}
