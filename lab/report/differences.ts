import { CONFIGURATIONS, type ConfigurationId } from '../configurations.js';
import type { LabReport, RunResult, ScenarioReport } from '../types.js';
import { failedChecks, plural, seconds, unmeasured } from './cells.js';

/**
 * What the reports open with: one line per scenario where the configurations that ran it behave
 * differently, with the measured numbers, configurations sharing a value grouped; the scenarios
 * where they all agree are only counted. A failed invariant always gets a line.
 */
export interface Differences {
  lines: { scenario: string; text: string }[];
  /** Scenarios with no line: the same result on every configuration it applies to. */
  agreed: number;
  /** Scenarios that applied to none of the configurations that ran. */
  notApplicable: number;
}

/** Time to final state differs when the slowest is at least this many times the fastest… */
const TIME_RATIO = 2;
/**
 * …and at least this much slower: on a loaded 2-core machine the same run varies by a few hundred
 * ms, a visibility timeout or a retry step does not.
 */
const TIME_GAP_MS = 1_000;

/** A configuration's short name (a peer's with `peer` before it). */
function shortName(id: ConfigurationId): string {
  const c = CONFIGURATIONS[id];
  return c.peer ? `peer ${c.short}` : c.short;
}

/** `A`, `A and B`, `A, B and C` */
function joinAnd(items: string[]): string {
  if (items.length <= 1) return items[0] ?? '';
  return `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`;
}

const on = (rs: RunResult[]) => `on ${joinAnd(rs.map((r) => shortName(r.configuration)))}`;

/** Runs grouped by a value, in the report's order within a group; groups sorted by `order`. */
function groupBy<T>(
  rs: RunResult[],
  key: (r: RunResult) => T,
  order: (a: T, b: T) => number = () => 0,
): { value: T; rs: RunResult[] }[] {
  const groups: { value: T; rs: RunResult[] }[] = [];
  for (const r of rs) {
    const v = key(r);
    const g = groups.find((x) => x.value === v);
    if (g) g.rs.push(r);
    else groups.push({ value: v, rs: [r] });
  }
  return groups.sort((a, b) => order(a.value, b.value));
}

/**
 * `2 retries on A; 4 on B; none on C`: the first group (and one after a zero) in full, the
 * others by their number only.
 */
function countText(
  groups: { value: number; rs: RunResult[] }[],
  full: (n: number) => string,
): string {
  let previousZero = true;
  return groups
    .map((g) => {
      const text = previousZero || g.value === 0 ? full(g.value) : String(g.value);
      previousZero = g.value === 0;
      return `${text} ${on(g.rs)}`;
    })
    .join('; ');
}

const anomaly = (get: (r: RunResult) => number, what: string) => ({
  get,
  text: (n: number) => (n ? `${n} ${what}` : `none ${what}`),
});
const ANOMALIES = [
  anomaly((r) => r.accounting.lost, 'lost'),
  anomaly((r) => r.accounting.duplicated, 'applied twice'),
  anomaly((r) => r.accounting.unexpected, 'unexpected'),
  anomaly((r) => r.accounting.orderViolations, 'out of order'),
];

/** Why a run failed, in a few words: its anomalies, else its first failed check or error. */
function failure(r: RunResult): string {
  if (!unmeasured(r)) {
    const anomalies = ANOMALIES.map((a) => a.get(r))
      .map((n, i) => (n ? ANOMALIES[i]?.text(n) : ''))
      .filter(Boolean);
    if (anomalies.length) return anomalies.join(', ');
  }
  const first = failedChecks(r)[0] ?? 'failed';
  return first.length > 100 ? `${first.slice(0, 99)}…` : first;
}

const desc = (a: number, b: number) => b - a;
const asc = (a: number, b: number) => a - b;
const distinct = (values: unknown[]) => new Set(values).size > 1;

/** `final after 0.1 s on A and B; 3.1 s on C`, or undefined when the times are alike. */
function timeText(rs: RunResult[]): string | undefined {
  const timed = rs.filter((r) => r.timeToFinalMs !== null);
  if (timed.length < 2) return undefined;
  const ts = timed.map((r) => r.timeToFinalMs as number);
  const fastest = Math.min(...ts);
  const slowest = Math.max(...ts);
  if (!(slowest >= TIME_RATIO * fastest && slowest - fastest >= TIME_GAP_MS)) return undefined;
  // clusters: a run joins the cluster of the fastest before it unless it differs from it as above
  const sorted = [...timed].sort(
    (a, b) => (a.timeToFinalMs as number) - (b.timeToFinalMs as number),
  );
  const clusters: RunResult[][] = [];
  for (const r of sorted) {
    const cluster = clusters.at(-1);
    const min = cluster?.[0]?.timeToFinalMs as number;
    const t = r.timeToFinalMs as number;
    if (cluster && !(t >= TIME_RATIO * min && t - min >= TIME_GAP_MS)) cluster.push(r);
    else clusters.push([r]);
  }
  return clusters
    .map((c, i) => {
      const lo = seconds(c[0]?.timeToFinalMs ?? null);
      const hi = seconds(c.at(-1)?.timeToFinalMs ?? null);
      const range = lo === hi ? lo : `${lo.replace(/ s$/, '')}–${hi}`;
      const inOrder = rs.filter((r) => c.includes(r)); // the report's order within a cluster
      return `${i === 0 ? 'final after ' : ''}${range} ${on(inOrder)}`;
    })
    .join('; ');
}

/** `parked at once on A; after 2 retries on B; after 4 on C` (groups by retries, ascending). */
function parkedAfter(groups: { value: number; rs: RunResult[] }[]): string {
  return groups
    .map((g, i) => {
      const when =
        g.value === 0
          ? 'at once'
          : i === 0 || groups[i - 1]?.value === 0
            ? `after ${plural(g.value, 'retry', 'retries')}`
            : `after ${g.value}`;
      return `${i === 0 ? 'parked ' : ''}${when} ${on(g.rs)}`;
    })
    .join('; ');
}

/** The line of one scenario, or undefined when its configurations agree. */
export function scenarioDifference(s: ScenarioReport): string | undefined {
  const applicable = s.results.filter((r) => r.applicable);
  const parts: string[] = [];
  const failing = applicable.filter((r) => !r.invariantHeld);
  if (failing.length) {
    parts.push(
      groupBy(failing, failure)
        .map((g) => `✗ ${on(g.rs)}: ${g.value}`)
        .join('; '),
    );
  }
  // the numbers of runs that were measured (a run that could not be set up has none)
  const rs = applicable.filter((r) => !unmeasured(r));
  if (rs.length >= 2) {
    for (const a of ANOMALIES) {
      if (!distinct(rs.map(a.get))) continue;
      // the ✗ above names the anomalies of a failed run already
      if (rs.filter((r) => a.get(r) > 0).every((r) => !r.invariantHeld)) continue;
      parts.push(countText(groupBy(rs, a.get, desc), a.text));
    }
    if (distinct(rs.map((r) => r.effects))) {
      parts.push(
        countText(
          groupBy(rs, (r) => r.effects, asc),
          (n) => plural(n, 'effect'),
        ),
      );
    }
    // when every run parked, fewest first (as the retries they parked after); else most first
    const allParked = rs.every((r) => r.parked > 0);
    if (distinct(rs.map((r) => r.parked))) {
      parts.push(
        countText(
          groupBy(rs, (r) => r.parked, allParked ? asc : desc),
          (n) => (n ? `${n} parked` : 'none parked'),
        ),
      );
    }
    if (distinct(rs.map((r) => r.retries))) {
      const groups = groupBy(rs, (r) => r.retries, asc);
      parts.push(
        allParked
          ? parkedAfter(groups)
          : countText(groups, (n) => (n ? plural(n, 'retry', 'retries') : 'no retry')),
      );
    }
    const time = timeText(rs);
    if (time) parts.push(time);
  }
  return parts.length ? parts.join(' — ') : undefined;
}

export function differences(report: LabReport): Differences {
  const lines: Differences['lines'] = [];
  let agreed = 0;
  let notApplicable = 0;
  for (const s of report.scenarios) {
    if (!s.results.some((r) => r.applicable)) {
      notApplicable++;
      continue;
    }
    const text = scenarioDifference(s);
    if (text) lines.push({ scenario: s.id, text });
    else agreed++;
  }
  return { lines, agreed, notApplicable };
}

/** The closing sentence: how many scenarios agreed (empty when there is nothing to say). */
export function agreedText(d: Differences): string {
  const parts: string[] = [];
  if (d.agreed > 0) {
    const which = d.lines.length
      ? plural(d.agreed, 'other scenario')
      : d.agreed === 1
        ? 'The one scenario'
        : `All ${d.agreed} scenarios`;
    parts.push(`${which}: the same result everywhere`);
  }
  if (d.notApplicable > 0) {
    parts.push(`${plural(d.notApplicable, 'scenario')} applied to none of the configurations run`);
  }
  return parts.length ? `${parts.join('; ')}.` : '';
}
