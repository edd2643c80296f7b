import { Duration } from 'aws-cdk-lib';
import {
  Alarm,
  ComparisonOperator,
  type IAlarmAction,
  type IMetric,
  Metric,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { METRICS_NAMESPACE } from '../../shared/outbox/metrics.js';
import { QUEUE_BOUNDS, QUEUE_METRICS } from '../../shared/transport/rabbitmq/index.js';

/** Queues that are bounded rather than drained, and the routes a consumer depends on. */
export interface QueueBoundAlarmsProps {
  /** RabbitMQ: queues bounded by `max-length` (ready messages, as the relay publishes them). */
  brokerBounded?: { queue: string; maxLength: number; atBound: string }[];
  /** RabbitMQ: consumer queues whose declared routes the relay verifies (`RouteMissing`). */
  brokerRoutes?: string[];
  /** SQS: queues bounded by their retention (a message older than it is deleted unread). */
  sqsBounded?: { id: string; queue: IQueue; retentionSeconds: number; maxVisible: number }[];
}

/**
 * The alarms of the bounded queues: at `QUEUE_BOUNDS.alarmFraction` of a `max-length` (before
 * the overflow behaviour starts), at half an SQS queue's retention (before messages expire), on
 * a visible backlog, and on a missing route within one minute. The relay publishes the RabbitMQ
 * depths on every invocation, so missing data is breaching for the near-bound alarms, as for every
 * alarm on a metric the relay always publishes (PipelineAlarms); `RouteMissing` is published only
 * when the management API answered, so missing data is not breaching there (a stopped relay is
 * the heartbeat alarm's business).
 */
export function addQueueBoundAlarms(
  scope: Construct,
  action: IAlarmAction,
  props: QueueBoundAlarmsProps,
): Alarm[] {
  const alarms: Alarm[] = [];
  const alarm = (
    id: string,
    metric: IMetric,
    threshold: number,
    description: string,
    treatMissingData = TreatMissingData.NOT_BREACHING,
  ) => {
    const a = new Alarm(scope, id, {
      metric,
      threshold,
      evaluationPeriods: 1,
      comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData,
      alarmDescription: description,
    });
    a.addAlarmAction(action);
    alarms.push(a);
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
      `${b.queue} holds ${QUEUE_BOUNDS.alarmFraction * 100} % of its max-length (${b.maxLength}); at the bound ${b.atBound}. (Or the relay stopped publishing: see the RelayHeartbeat alarm.)`,
      TreatMissingData.BREACHING,
    );
  }
  for (const queue of props.brokerRoutes ?? []) {
    alarm(
      `RouteMissing${id(queue)}`,
      broker(QUEUE_METRICS.routeMissing, queue, Duration.minutes(1)),
      1,
      `A declared binding to ${queue} is missing on the broker: the relay holds the events it would route there (route-missing); restore it with the broker-setup resource or \`backend.prepare\`.`,
    );
  }
  for (const s of props.sqsBounded ?? []) {
    alarm(
      `${s.id}OldestMessageAge`,
      s.queue.metricApproximateAgeOfOldestMessage({
        period: Duration.minutes(5),
        statistic: 'Maximum',
      }),
      Math.floor(s.retentionSeconds / 2),
      `A message has waited half the queue's retention (${s.retentionSeconds} s): SQS deletes it unread at the retention.`,
    );
    alarm(
      `${s.id}Backlog`,
      s.queue.metricApproximateNumberOfMessagesVisible({
        period: Duration.minutes(5),
        statistic: 'Maximum',
      }),
      s.maxVisible,
      'Messages pile up in the queue: its consumer is down or behind.',
    );
  }
  return alarms;
}
