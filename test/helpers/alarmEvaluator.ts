import type { Template } from 'aws-cdk-lib/assertions';

/**
 * A small evaluator of the CloudWatch alarms of a synthesized template over a scenario of
 * datapoints, minute by minute (CloudWatch UG, "Using Amazon CloudWatch alarms": period,
 * evaluation periods, datapoints to alarm, comparison; "Configuring how CloudWatch alarms treat
 * missing data"; "Metric math syntax and functions" for `DIFF`). What it simplifies: an alarm is
 * evaluated when one of its periods ends, over its last `EvaluationPeriods` periods (all inside
 * the scenario: before it, the pipeline is taken to be healthy, the alarm OK); ALARM when at
 * least `DatapointsToAlarm` of them breach, else OK (`missing`: INSUFFICIENT_DATA when every
 * datapoint is missing; `ignore`: the state kept); `DIFF` sees only the datapoints of the range.
 * A notification is a transition into ALARM (the stacks' alarms have alarm actions only).
 */

/** A metric as an alarm names it; a token dimension (a queue's or function's name) is its logical id. */
export interface MetricKey {
  namespace: string;
  metricName: string;
  dimensions: Record<string, string>;
}

/** The values published for `metric` during `minute` (one per datapoint sent), or none. */
export type Scenario = (metric: MetricKey, minute: number) => number[] | undefined;

type Stat = 'Sum' | 'Maximum' | 'Minimum' | 'Average' | 'SampleCount';

interface MetricInput {
  kind: 'metric';
  key: MetricKey;
  stat: Stat;
}
interface DiffInput {
  kind: 'diff';
  of: MetricInput;
}

export interface AlarmRule {
  /** The alarm's logical id. */
  id: string;
  periodMinutes: number;
  evaluationPeriods: number;
  datapointsToAlarm: number;
  comparison: string;
  threshold: number;
  treatMissingData: 'breaching' | 'notBreaching' | 'missing' | 'ignore';
  input: MetricInput | DiffInput;
}

type Dimension = { Name: string; Value: unknown };

function dimensionValue(value: unknown): string {
  if (typeof value === 'string') return value;
  const v = value as { Ref?: string; 'Fn::GetAtt'?: [string, string] };
  if (v.Ref) return v.Ref;
  if (v['Fn::GetAtt']) return v['Fn::GetAtt'][0];
  throw new Error(`alarm evaluator: dimension value ${JSON.stringify(value)}`);
}

function key(namespace: string, metricName: string, dimensions: Dimension[] = []): MetricKey {
  return {
    namespace,
    metricName,
    dimensions: Object.fromEntries(dimensions.map((d) => [d.Name, dimensionValue(d.Value)])),
  };
}

/** The rules of every `AWS::CloudWatch::Alarm` of `template`. */
export function alarmRules(template: Template): AlarmRule[] {
  return Object.entries(template.findResources('AWS::CloudWatch::Alarm')).map(([id, r]) => {
    const p = r.Properties as {
      Namespace?: string;
      MetricName?: string;
      Dimensions?: Dimension[];
      Statistic?: Stat;
      Period?: number;
      Metrics?: {
        Id: string;
        Expression?: string;
        Period?: number;
        MetricStat?: {
          Metric: { Namespace: string; MetricName: string; Dimensions?: Dimension[] };
          Period: number;
          Stat: Stat;
        };
      }[];
      EvaluationPeriods: number;
      DatapointsToAlarm?: number;
      ComparisonOperator: string;
      Threshold: number;
      TreatMissingData?: AlarmRule['treatMissingData'];
    };
    let input: AlarmRule['input'];
    let period: number;
    if (p.Metrics) {
      const expression = p.Metrics.find((m) => m.Expression !== undefined);
      const stats = p.Metrics.filter((m) => m.MetricStat);
      const diff = /^DIFF\((\w+)\)$/.exec(expression?.Expression ?? '');
      const of = stats.find((m) => m.Id === diff?.[1]);
      if (!diff || !of?.MetricStat || stats.length !== 1) {
        throw new Error(`alarm evaluator: ${id}: only DIFF(metric) is evaluated`);
      }
      const m = of.MetricStat;
      input = {
        kind: 'diff',
        of: {
          kind: 'metric',
          key: key(m.Metric.Namespace, m.Metric.MetricName, m.Metric.Dimensions),
          stat: m.Stat,
        },
      };
      period = expression?.Period ?? m.Period;
    } else {
      input = {
        kind: 'metric',
        key: key(p.Namespace as string, p.MetricName as string, p.Dimensions),
        stat: p.Statistic as Stat,
      };
      period = p.Period as number;
    }
    if (period % 60 !== 0) throw new Error(`alarm evaluator: ${id}: period ${period} s`);
    return {
      id,
      periodMinutes: period / 60,
      evaluationPeriods: p.EvaluationPeriods,
      datapointsToAlarm: p.DatapointsToAlarm ?? p.EvaluationPeriods,
      comparison: p.ComparisonOperator,
      threshold: p.Threshold,
      treatMissingData: p.TreatMissingData ?? 'missing',
      input,
    };
  });
}

function aggregate(stat: Stat, values: number[]): number {
  switch (stat) {
    case 'Sum':
      return values.reduce((a, b) => a + b, 0);
    case 'Maximum':
      return Math.max(...values);
    case 'Minimum':
      return Math.min(...values);
    case 'Average':
      return values.reduce((a, b) => a + b, 0) / values.length;
    case 'SampleCount':
      return values.length;
  }
}

/** The datapoint of `input` for period `k` (minutes k·P … k·P + P − 1), or undefined: missing. */
function datapoint(
  input: MetricInput,
  periodMinutes: number,
  k: number,
  scenario: Scenario,
): number | undefined {
  const values: number[] = [];
  for (let m = k * periodMinutes; m < (k + 1) * periodMinutes; m++) {
    values.push(...(scenario(input.key, m) ?? []));
  }
  return values.length > 0 ? aggregate(input.stat, values) : undefined;
}

function breaches(comparison: string, value: number, threshold: number): boolean {
  switch (comparison) {
    case 'GreaterThanThreshold':
      return value > threshold;
    case 'GreaterThanOrEqualToThreshold':
      return value >= threshold;
    case 'LessThanThreshold':
      return value < threshold;
    case 'LessThanOrEqualToThreshold':
      return value <= threshold;
    default:
      throw new Error(`alarm evaluator: comparison ${comparison}`);
  }
}

export type AlarmState = 'OK' | 'ALARM' | 'INSUFFICIENT_DATA';

/** The minutes at whose end `rule` went into ALARM over `minutes` minutes of `scenario`. */
export function notifications(rule: AlarmRule, scenario: Scenario, minutes: number): number[] {
  const out: number[] = [];
  let state: AlarmState = 'OK';
  const P = rule.periodMinutes;
  const N = rule.evaluationPeriods;
  for (let minute = 0; minute < minutes; minute++) {
    if ((minute + 1) % P !== 0) continue;
    const last = (minute + 1) / P - 1;
    const first = last - N + 1;
    if (first < 0) continue;
    const range = Array.from({ length: N }, (_, i) => first + i);
    let points: (number | undefined)[];
    if (rule.input.kind === 'metric') {
      const input = rule.input;
      points = range.map((k) => datapoint(input, P, k, scenario));
    } else {
      // DIFF over the range's datapoints: each present one less the present one before it
      const input = rule.input.of;
      const series = range.map((k) => datapoint(input, P, k, scenario));
      let previous: number | undefined;
      points = series.map((v) => {
        if (v === undefined) return undefined;
        const d = previous === undefined ? undefined : v - previous;
        previous = v;
        return d;
      });
    }
    let breaching = 0;
    let present = 0;
    for (const v of points) {
      if (v === undefined) {
        if (rule.treatMissingData === 'breaching') breaching++;
        if (rule.treatMissingData === 'breaching' || rule.treatMissingData === 'notBreaching') {
          present++;
        }
        continue;
      }
      present++;
      if (breaches(rule.comparison, v, rule.threshold)) breaching++;
    }
    let next: AlarmState;
    if (breaching >= rule.datapointsToAlarm) next = 'ALARM';
    else if (present === 0) next = rule.treatMissingData === 'ignore' ? state : 'INSUFFICIENT_DATA';
    else next = 'OK';
    if (next === 'ALARM' && state !== 'ALARM') out.push(minute);
    state = next;
  }
  return out;
}

/** Every notification of the template's alarms over the scenario: alarm id → minutes. */
export function evaluateAlarms(
  template: Template,
  scenario: Scenario,
  minutes: number,
): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const rule of alarmRules(template)) {
    const fired = notifications(rule, scenario, minutes);
    if (fired.length > 0) out.set(rule.id, fired);
  }
  return out;
}
