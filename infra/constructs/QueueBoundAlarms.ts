import { Duration } from 'aws-cdk-lib';
import { type Alarm, ComparisonOperator, type IMetric, Metric } from 'aws-cdk-lib/aws-cloudwatch';
import type { Function as LambdaFunction } from 'aws-cdk-lib/aws-lambda';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { METRICS_NAMESPACE } from '../../shared/config/constants.js';
import { QUEUE_BOUNDS, QUEUE_METRICS } from '../../shared/transport/rabbitmq/constants.js';
import type { PipelineAlarms } from './PipelineAlarms.js';
import type { RunbookValues } from './runbook.js';

/** Queues that are bounded rather than drained, and the routes a consumer depends on. */
export interface QueueBoundAlarmsProps {
  /** RabbitMQ: queues bounded by `max-length` (ready messages, as the relay publishes them). */
  brokerBounded?: { queue: string; maxLength: number; atBound: string }[];
  /** RabbitMQ: consumer queues whose declared routes the relay verifies (`RouteMissing`). */
  brokerRoutes?: string[];
  /** RabbitMQ: the function that declares the topology (the runbook's fix for a missing route). */
  brokerSetup?: LambdaFunction;
  /**
   * SQS: queues bounded by their retention (a message older than it is deleted unread), with the
   * function that reads them (or gave their messages back, for a parking queue).
   */
  sqsBounded?: {
    id: string;
    queue: IQueue;
    retentionSeconds: number;
    maxVisible: number;
    consumer?: LambdaFunction;
    /** What a backlog there means (default: its consumer is down or behind). */
    backlogMeaning?: string;
  }[];
}

/**
 * The alarms of the bounded queues: at `QUEUE_BOUNDS.alarmFraction` of a `max-length` (before
 * the overflow behaviour starts), at half an SQS queue's retention (before messages expire), on
 * a visible backlog, and on a missing route within one minute. Missing data is never breaching
 * here: the relay publishes the RabbitMQ depths and `RouteMissing` only when it could read them
 * from the broker, and a broker it cannot read is QueueMetricsUnavailable's alarm, a stopped relay
 * the heartbeat's (OutboxRelayFunction). Each description names its runbook section (one per
 * kind of alarm per queue, else the alarm's id). Added to `alarms` (PipelineAlarms).
 */
export function addQueueBoundAlarms(alarms: PipelineAlarms, props: QueueBoundAlarmsProps): Alarm[] {
  const added: Alarm[] = [];
  const alarm = (
    id: string,
    metric: IMetric,
    threshold: number,
    meaning: string,
    runbook: { section: string; values?: RunbookValues },
  ) => {
    added.push(
      alarms.addAlarm(id, {
        metric,
        threshold,
        meaning,
        comparison: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        runbook: runbook.section,
        values: runbook.values,
      }),
    );
  };
  const broker = (metricName: string, queue: string, period: Duration) =>
    new Metric({
      namespace: METRICS_NAMESPACE,
      metricName,
      dimensionsMap: { service: 'outbox-relay', Queue: queue },
      statistic: 'Maximum',
      period,
    });
  const id = (queue: string) => queue.replace(/[^A-Za-z0-9]/g, '');

  for (const b of props.brokerBounded ?? []) {
    alarm(
      `NearBound${id(b.queue)}`,
      broker(QUEUE_METRICS.ready, b.queue, Duration.minutes(5)),
      Math.floor(b.maxLength * QUEUE_BOUNDS.alarmFraction),
      `${b.queue} holds ${QUEUE_BOUNDS.alarmFraction * 100} % of its max-length (${b.maxLength}); at the bound ${b.atBound}.`,
      { section: 'NearBound', values: { queue: b.queue } },
    );
  }
  for (const queue of props.brokerRoutes ?? []) {
    alarm(
      `RouteMissing${id(queue)}`,
      broker(QUEUE_METRICS.routeMissing, queue, Duration.minutes(1)),
      1,
      `A declared binding to ${queue} is missing on the broker: the relay holds the events it would route there (route-missing).`,
      {
        section: 'RouteMissing',
        values: props.brokerSetup ? { function: props.brokerSetup.functionName } : {},
      },
    );
  }
  for (const s of props.sqsBounded ?? []) {
    const consumer: RunbookValues = s.consumer
      ? { function: s.consumer.functionName, 'log group': s.consumer.logGroup.logGroupName }
      : {};
    alarm(
      `${s.id}OldestMessageAge`,
      s.queue.metricApproximateAgeOfOldestMessage({
        period: Duration.minutes(5),
        statistic: 'Maximum',
      }),
      Math.floor(s.retentionSeconds / 2),
      `A message has waited half the queue's retention (${s.retentionSeconds} s): SQS deletes it unread at the retention.`,
      { section: `${s.id}OldestMessageAge`, values: consumer },
    );
    alarm(
      `${s.id}Backlog`,
      s.queue.metricApproximateNumberOfMessagesVisible({
        period: Duration.minutes(5),
        statistic: 'Maximum',
      }),
      s.maxVisible,
      s.backlogMeaning ?? 'Messages pile up in the queue: its consumer is down or behind.',
      { section: `${s.id}Backlog`, values: consumer },
    );
  }
  return added;
}
