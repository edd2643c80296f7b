import { Duration } from 'aws-cdk-lib';
import {
  Alarm,
  ComparisonOperator,
  type IMetric,
  Metric,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { Alias } from 'aws-cdk-lib/aws-kms';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { Topic } from 'aws-cdk-lib/aws-sns';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { METRICS_NAMESPACE, OUTBOX_METRICS } from '../../shared/outbox/metrics.js';
import { QUEUE_METRICS } from '../../shared/transport/rabbitmq/index.js';

const PARKED = 'A message arrived in the parking lot: read its diagnosis with `cli parked list`.';

export interface PipelineAlarmsProps {
  relay: IFunction;
  reserve: IFunction;
  /** SQS pipeline: parking arrivals and the source's oldest message age. */
  queues?: { source: IQueue; parking: IQueue };
  /** RabbitMQ pipeline: queue names whose depths the relay publishes (parking, backlog). */
  brokerQueues?: { source: string; parking: string };
  brokerBacklog?: number;
  /** Thresholds. */
  outboxBacklog?: number;
  oldestUnpublishedSeconds?: number;
  oldestMessageSeconds?: number;
}

/**
 * The alarms an operator needs, on one SNS topic: a message arrived in parking, the oldest message
 * waits too long, the outbox backlog grows or gets old or has rows needing attention (metrics the
 * relay publishes), the relay or the consumer fails.
 */
export class PipelineAlarms extends Construct {
  readonly topic: Topic;
  readonly alarms: Alarm[] = [];

  constructor(scope: Construct, id: string, props: PipelineAlarmsProps) {
    super(scope, id);
    this.topic = new Topic(this, 'Topic', {
      enforceSSL: true,
      masterKey: Alias.fromAliasName(this, 'SnsKey', 'alias/aws/sns'),
    });
    const action = new SnsAction(this.topic);
    const alarm = (name: string, metric: IMetric, threshold: number, description: string) => {
      const a = new Alarm(this, name, {
        metric,
        threshold,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
        alarmDescription: description,
      });
      a.addAlarmAction(action);
      this.alarms.push(a);
    };
    const outbox = (metricName: string, statistic: string) =>
      new Metric({
        namespace: METRICS_NAMESPACE,
        metricName,
        dimensionsMap: { service: 'outbox-relay', Outbox: 'outbox' },
        statistic,
        period: Duration.minutes(5),
      });

    if (props.queues) {
      alarm(
        'ParkedMessages',
        props.queues.parking.metricApproximateNumberOfMessagesVisible({
          period: Duration.minutes(1),
          statistic: 'Maximum',
        }),
        0,
        PARKED,
      );
      alarm(
        'OldestMessageAge',
        props.queues.source.metricApproximateAgeOfOldestMessage({
          period: Duration.minutes(1),
          statistic: 'Maximum',
        }),
        props.oldestMessageSeconds ?? 300,
        'The oldest message waiting for the consumer is too old.',
      );
    }
    if (props.brokerQueues) {
      // Amazon MQ vends no per-queue CloudWatch metrics for RabbitMQ 4: the relay publishes the
      // depths it reads from the management API once a minute.
      const depth = (metricName: string, queue: string) =>
        new Metric({
          namespace: METRICS_NAMESPACE,
          metricName,
          dimensionsMap: { service: 'outbox-relay', Queue: queue },
          statistic: 'Maximum',
          period: Duration.minutes(5),
        });
      alarm('ParkedMessages', depth(QUEUE_METRICS.depth, props.brokerQueues.parking), 0, PARKED);
      alarm(
        'ConsumerBacklog',
        depth(QUEUE_METRICS.ready, props.brokerQueues.source),
        props.brokerBacklog ?? 1_000,
        'Messages pile up in the consumer queue (RabbitMQ has no oldest-message age metric).',
      );
    }
    alarm(
      'OutboxBacklog',
      outbox(OUTBOX_METRICS.backlog, 'Minimum'),
      props.outboxBacklog ?? 1_000,
      'The outbox backlog stays high.',
    );
    alarm(
      'OutboxOldestUnpublished',
      outbox(OUTBOX_METRICS.oldestAge, 'Maximum'),
      props.oldestUnpublishedSeconds ?? 120,
      'An event has waited too long to be published.',
    );
    alarm(
      'OutboxNeedsAttention',
      outbox(OUTBOX_METRICS.needsAttention, 'Maximum'),
      0,
      'Outbox rows need attention: `cli outbox status`.',
    );
    alarm(
      'RelayErrors',
      props.relay.metricErrors({ period: Duration.minutes(5) }),
      0,
      'The outbox relay failed.',
    );
    alarm(
      'ReserveErrors',
      props.reserve.metricErrors({ period: Duration.minutes(5) }),
      0,
      'The inventory consumer failed.',
    );
  }
}
