import { Duration } from 'aws-cdk-lib';
import { type Alarm, Metric } from 'aws-cdk-lib/aws-cloudwatch';
import type { Function as LambdaFunction } from 'aws-cdk-lib/aws-lambda';
import { METRICS_NAMESPACE } from '../../shared/config/constants.js';
import { CONSUMER_METRICS, CONSUMER_METRICS_SERVICE } from '../../shared/consumer/metrics.js';
import type { AlarmSpec, PipelineAlarms } from './PipelineAlarms.js';
import { type RunbookSection, runbookSection } from './runbook.js';

/** How a consumer's alarms are named and set. */
export interface ConsumerAlarmOptions {
  /** Prefix of the alarms' ids (default none): a second consumer on the same alarms needs one. */
  idPrefix?: string;
  /** Id of the alarm on the function's errors (default `<idPrefix>ConsumerErrors`). */
  errorsAlarmId?: string;
  /** What the descriptions call the consumer (default `consumer`). */
  label?: string;
  /** Visible (SQS) or ready (RabbitMQ) messages in its queue (default 1,000). */
  backlog?: number;
}

export const PARKED = 'Messages are in the parking lot.';
export const NEW_PARKED = 'New messages arrived in the parking lot (its depth rose).';

/**
 * Adds a consumer's alarms to `alarms`: each id is `<idPrefix><kind>`, its runbook section the
 * kind's (or the id's own, when the runbook has one), its commands filled with the transport and,
 * where they name one, the consumer's function. Returns the adder and what it added.
 */
export function consumerAlarmAdder(
  alarms: PipelineAlarms,
  transport: 'sqs' | 'rabbitmq',
  options: ConsumerAlarmOptions,
) {
  const added: Alarm[] = [];
  const prefix = options.idPrefix ?? '';
  const add = (kind: RunbookSection, spec: Omit<AlarmSpec, 'runbook'>, id = `${prefix}${kind}`) => {
    const alarm = alarms.addAlarm(id, {
      ...spec,
      runbook: runbookSection(id, kind),
      values: { transport, ...spec.values },
    });
    added.push(alarm);
    return alarm;
  };
  const label = options.label ?? 'consumer';
  /** The function failed (Lambda's `Errors`). */
  const errors = (fn: LambdaFunction) =>
    add(
      'ReserveErrors',
      {
        metric: fn.metricErrors({ period: Duration.minutes(5) }),
        threshold: 0,
        meaning: `The ${label} failed.`,
        values: { function: fn.functionName, 'log group': fn.logGroup.logGroupName },
      },
      options.errorsAlarmId ?? `${prefix}ConsumerErrors`,
    );
  /** Dead-lettering itself fails: the parking lot refused a park (the consumers' `ParkRefused`). */
  const parkRefused = (meaning: string) =>
    add('ParkRefused', {
      metric: new Metric({
        namespace: METRICS_NAMESPACE,
        metricName: CONSUMER_METRICS.parkRefused,
        dimensionsMap: { service: CONSUMER_METRICS_SERVICE, Transport: transport },
        statistic: 'Sum',
        period: Duration.minutes(5),
      }),
      threshold: 0,
      meaning: `The ${label} could not park a message: ${meaning}`,
    });
  return { add, errors, parkRefused, added, backlog: options.backlog ?? 1_000 };
}
