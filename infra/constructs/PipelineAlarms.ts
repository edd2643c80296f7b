import { ArnFormat, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import {
  Alarm,
  ComparisonOperator,
  type IMetric,
  MathExpression,
  Metric,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Key } from 'aws-cdk-lib/aws-kms';
import type { Function as LambdaFunction } from 'aws-cdk-lib/aws-lambda';
import { Topic } from 'aws-cdk-lib/aws-sns';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { METRICS_NAMESPACE, OUTBOX_TABLES } from '../../shared/config/constants.js';
import { CONSUMER_METRICS, CONSUMER_METRICS_SERVICE } from '../../shared/consumer/metrics.js';
import { OUTBOX_METRICS } from '../../shared/outbox/metrics.js';
import { QUEUE_METRICS } from '../../shared/transport/rabbitmq/constants.js';
import { addQueueBoundAlarms, type QueueBoundAlarmsProps } from './QueueBoundAlarms.js';
import { alarmDescription, type RunbookValues } from './runbook.js';

const PARKED = 'Messages are in the parking lot.';
const NEW_PARKED = 'New messages arrived in the parking lot (its depth rose).';
/**
 * Appended to the alarms on the outbox gauges: only runs that read the outboxes publish them (a
 * kicked run, a sweep; every minute while rows are left, hourly at rest), so missing data is not
 * breaching there, and a stopped relay is the heartbeat's alarm.
 */
const FROM_RUNS =
  ' (Reported by each relay run that reads the outboxes: every minute while rows are left, at least hourly at rest; a stopped relay raises RelayHeartbeat.)';
/**
 * Appended to the alarms on the queue depths the relay reads from the broker: while it cannot
 * (broker or management API unreachable) QueueMetricsUnavailable alone fires, and a stopped relay
 * is the heartbeat's alarm, so their missing data is not breaching.
 */
const FROM_BROKER =
  ' (Read by the relay from the broker each minute: while it cannot, QueueMetricsUnavailable fires instead.)';

export interface PipelineAlarmsProps {
  relay: LambdaFunction;
  reserve: LambdaFunction;
  /** The order side's consumer of inventory's results: it throws when its database fails. */
  orderResults?: LambdaFunction;
  /** The daily maintenance function: it fails (throws) so that this alarm fires. */
  maintenance?: LambdaFunction;
  /** SQS pipeline: parking arrivals, the source's backlog and oldest message age. */
  queues?: { source: IQueue; parking: IQueue };
  /**
   * RabbitMQ pipeline: queue names whose depths the relay publishes (parking, backlog, and the
   * results parking queue `orders.inventory-results` dead-letters into), and the broker's id (for
   * the runbook's commands).
   */
  brokerQueues?: { source: string; parking: string; resultsParking?: string; brokerId?: string };
  /** Thresholds. */
  consumerBacklog?: number;
  outboxBacklog?: number;
  oldestUnpublishedSeconds?: number;
  oldestMessageSeconds?: number;
  /** Bounded queues and missing routes: see QueueBoundAlarms. */
  bounds?: QueueBoundAlarmsProps;
}

/** How one alarm evaluates (defaults: one period, greater than the threshold, missing = OK). */
export interface AlarmOptions {
  comparison?: ComparisonOperator;
  treatMissingData?: TreatMissingData;
  evaluationPeriods?: number;
  datapointsToAlarm?: number;
}

/**
 * The alarms an operator needs, on one SNS topic encrypted with a customer-managed key CloudWatch
 * may use: the relay's heartbeat is missing or its rounds fail, messages are in (or newly arrived
 * in) parking, the consumer's backlog or oldest message grows, an outbox's backlog grows or gets
 * old or has rows needing attention, a function fails; on RabbitMQ, the queue depths cannot be
 * read. Each means one thing: only the heartbeat treats missing data as breaching (a stopped
 * relay raises it), and the depths the relay reads from the broker have their own "unavailable"
 * alarm rather than breaching each on a broker outage. Each description names what to check, the
 * command that shows it and its section of the runbook (runbook.ts, docs/operations.md). The
 * relay's Lambda `Throttles` has no alarm: producers kick it beyond a reserved concurrency on
 * purpose, and a relay that cannot run at all misses its heartbeat.
 */
export class PipelineAlarms extends Construct {
  readonly topic: Topic;
  readonly key: Key;
  readonly alarms: Alarm[] = [];

  constructor(scope: Construct, id: string, props: PipelineAlarmsProps) {
    super(scope, id);
    const stack = Stack.of(this);
    // CloudWatch publishes to an encrypted topic only with kms:Decrypt and kms:GenerateDataKey* on
    // its key: the AWS-managed alias/aws/sns key cannot grant that, a customer-managed one can.
    // Both grants are scoped to this account's alarms (confused deputy).
    const cloudwatch = new ServicePrincipal('cloudwatch.amazonaws.com');
    const fromOurAlarms = {
      StringEquals: { 'aws:SourceAccount': stack.account },
      ArnLike: {
        'aws:SourceArn': stack.formatArn({
          service: 'cloudwatch',
          resource: 'alarm',
          resourceName: '*',
          arnFormat: ArnFormat.COLON_RESOURCE_NAME,
        }),
      },
    };
    this.key = new Key(this, 'TopicKey', {
      description: 'Encrypts the alarm topic; CloudWatch alarms of this account may use it',
      enableKeyRotation: true,
      // `cdk destroy` schedules its deletion (no charge while pending: README, tear down)
      removalPolicy: RemovalPolicy.DESTROY,
      pendingWindow: Duration.days(7),
    });
    this.key.addToResourcePolicy(
      new PolicyStatement({
        sid: 'CloudWatchAlarmsPublishToTheTopic',
        principals: [cloudwatch],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
        conditions: fromOurAlarms,
      }),
    );
    this.topic = new Topic(this, 'Topic', { enforceSSL: true, masterKey: this.key });
    // The topic policy CDK writes (enforceSSL) replaces SNS's default one: allow our alarms.
    this.topic.addToResourcePolicy(
      new PolicyStatement({
        sid: 'CloudWatchAlarmsPublish',
        principals: [cloudwatch],
        actions: ['sns:Publish'],
        resources: [this.topic.topicArn],
        conditions: fromOurAlarms,
      }),
    );
    const action = new SnsAction(this.topic);
    const values: RunbookValues = {
      stack: stack.stackName,
      ...(props.queues
        ? { transport: 'sqs' }
        : props.brokerQueues
          ? { transport: 'rabbitmq' }
          : {}),
    };
    /** The runbook's values for an alarm about function `fn`. */
    const of = (fn: LambdaFunction): RunbookValues => ({
      function: fn.functionName,
      'log group': fn.logGroup.logGroupName,
    });
    /** An alarm whose runbook section is its id (`name`), the commands filled from `more`. */
    const alarm = (
      name: string,
      metric: IMetric,
      threshold: number,
      meaning: string,
      options: AlarmOptions = {},
      more: RunbookValues = {},
    ): Alarm => {
      const a = new Alarm(this, name, {
        metric,
        threshold,
        evaluationPeriods: options.evaluationPeriods ?? 1,
        datapointsToAlarm: options.datapointsToAlarm,
        comparisonOperator: options.comparison ?? ComparisonOperator.GREATER_THAN_THRESHOLD,
        treatMissingData: options.treatMissingData ?? TreatMissingData.NOT_BREACHING,
        alarmDescription: alarmDescription(meaning, name, { ...values, ...more }),
      });
      a.addAlarmAction(action);
      this.alarms.push(a);
      return a;
    };
    /** The heartbeat, published by each invocation: its absence means the relay is not running. */
    const relayPublished: AlarmOptions = { treatMissingData: TreatMissingData.BREACHING };
    const relayMetric = (
      metricName: string,
      dimensions: Record<string, string>,
      statistic: string,
      period = Duration.minutes(5),
    ) =>
      new Metric({
        namespace: METRICS_NAMESPACE,
        metricName,
        dimensionsMap: { service: 'outbox-relay', ...dimensions },
        statistic,
        period,
      });
    /**
     * New arrivals in a parking lot: the depth rose between two consecutive minutes. Two periods
     * give DIFF its preceding value inside the evaluation range; one rise is enough.
     */
    const newArrivals = (depth: IMetric) =>
      new MathExpression({
        expression: 'DIFF(depth)',
        usingMetrics: { depth },
        period: Duration.minutes(1),
        label: 'parking depth increase',
      });
    const arrivals: AlarmOptions = { evaluationPeriods: 2, datapointsToAlarm: 1 };

    if (props.queues) {
      const parkingDepth = props.queues.parking.metricApproximateNumberOfMessagesVisible({
        period: Duration.minutes(1),
        statistic: 'Maximum',
      });
      alarm('ParkedMessages', parkingDepth, 0, PARKED);
      // NumberOfMessagesSent leaves out messages SQS moves there by the redrive policy: watch
      // the depth's rise instead, which sees both the consumer's parking and the safety net.
      alarm('NewParkedMessages', newArrivals(parkingDepth), 0, NEW_PARKED, arrivals);
      alarm(
        'OldestMessageAge',
        props.queues.source.metricApproximateAgeOfOldestMessage({
          period: Duration.minutes(1),
          statistic: 'Maximum',
        }),
        props.oldestMessageSeconds ?? 300,
        'The oldest message waiting for the consumer is too old.',
        {},
        of(props.reserve),
      );
      // The age leaves out messages received three times or more (poison): the backlog does not.
      alarm(
        'ConsumerBacklog',
        props.queues.source.metricApproximateNumberOfMessagesVisible({
          period: Duration.minutes(5),
          statistic: 'Minimum',
        }),
        props.consumerBacklog ?? 1_000,
        'Messages pile up in the consumer queue (visible backlog, poison included).',
        {},
        of(props.reserve),
      );
    }
    if (props.brokerQueues) {
      // Amazon MQ vends no per-queue CloudWatch metrics for RabbitMQ 4: the relay publishes the
      // depths it reads from the management API once a minute, and whether it could read them.
      const depth = (metricName: string, queue: string, period?: Duration) =>
        relayMetric(metricName, { Queue: queue }, 'Maximum', period);
      alarm(
        'QueueMetricsUnavailable',
        relayMetric(QUEUE_METRICS.available, {}, 'Maximum'),
        1,
        'For 5 minutes no relay run could read the broker’s queue depths and routes (broker or management API unreachable, broker credentials refused): the depth alarms are blind meanwhile.',
        { comparison: ComparisonOperator.LESS_THAN_THRESHOLD },
        props.brokerQueues.brokerId ? { broker: props.brokerQueues.brokerId } : {},
      );
      alarm(
        'ParkedMessages',
        depth(QUEUE_METRICS.depth, props.brokerQueues.parking),
        0,
        PARKED + FROM_BROKER,
      );
      alarm(
        'NewParkedMessages',
        newArrivals(depth(QUEUE_METRICS.depth, props.brokerQueues.parking, Duration.minutes(1))),
        0,
        NEW_PARKED,
        arrivals,
      );
      alarm(
        'ConsumerBacklog',
        depth(QUEUE_METRICS.ready, props.brokerQueues.source),
        props.consumerBacklog ?? 1_000,
        `Messages pile up in the consumer queue (RabbitMQ has no oldest-message age metric).${FROM_BROKER}`,
        {},
        of(props.reserve),
      );
      if (props.brokerQueues.resultsParking) {
        alarm(
          'ResultsParkedMessages',
          depth(QUEUE_METRICS.depth, props.brokerQueues.resultsParking),
          0,
          `Inventory results are in ${props.brokerQueues.resultsParking}: the order side gave them back past the delivery limit (its database down?). Their orders show a stale reservation status until they are moved back.${FROM_BROKER}`,
          {},
          props.orderResults ? of(props.orderResults) : {},
        );
      }
    }

    for (const table of OUTBOX_TABLES) {
      // `outbox` keeps the alarm ids it always had; `inventory_outbox` gets the same set
      const prefix = table === 'outbox' ? '' : 'Inventory';
      const outbox = (metricName: string, statistic: string) =>
        relayMetric(metricName, { Outbox: table }, statistic);
      alarm(
        `${prefix}RelayHeartbeat`,
        outbox(OUTBOX_METRICS.heartbeat, 'Sum'),
        1,
        `The relay has not reported on ${table} for 5 minutes: it is not running (schedule disabled, failing at start, throttled: no invocation got through).`,
        { ...relayPublished, comparison: ComparisonOperator.LESS_THAN_THRESHOLD },
        of(props.relay),
      );
      alarm(
        `${prefix}RelayRoundErrors`,
        outbox(OUTBOX_METRICS.roundErrors, 'Sum'),
        0,
        `Relay rounds on ${table} fail (database trouble, a bug): the relay logs and retries them, so Lambda's Errors stays 0.`,
        {},
        of(props.relay),
      );
      alarm(
        `${prefix}OutboxBacklog`,
        outbox(OUTBOX_METRICS.backlog, 'Minimum'),
        props.outboxBacklog ?? 1_000,
        `The ${table} backlog stays high.${FROM_RUNS}`,
      );
      alarm(
        `${prefix}OutboxOldestUnpublished`,
        outbox(OUTBOX_METRICS.oldestAge, 'Maximum'),
        props.oldestUnpublishedSeconds ?? 120,
        `An event in ${table} has waited too long to be published.${FROM_RUNS}`,
      );
      alarm(
        `${prefix}OutboxNeedsAttention`,
        outbox(OUTBOX_METRICS.needsAttention, 'Maximum'),
        0,
        `Rows in ${table} need attention. At rest the hourly sweep reports them again (one notification an hour while they wait).${FROM_RUNS}`,
      );
    }
    alarm(
      'RelayErrors',
      props.relay.metricErrors({ period: Duration.minutes(5) }),
      0,
      'The outbox relay failed (a timeout or a start-up failure: round errors have their own alarm).',
      {},
      of(props.relay),
    );
    alarm(
      'ReserveErrors',
      props.reserve.metricErrors({ period: Duration.minutes(5) }),
      0,
      'The inventory consumer failed.',
      {},
      of(props.reserve),
    );
    if (props.orderResults) {
      alarm(
        'OrderResultsErrors',
        props.orderResults.metricErrors({ period: Duration.minutes(5) }),
        0,
        'The order side’s results consumer failed (its database?): the batch went back to the queue and orders show a stale reservation status.',
        {},
        of(props.orderResults),
      );
    }
    if (props.maintenance) {
      alarm(
        'MaintenanceErrors',
        props.maintenance.metricErrors({ period: Duration.minutes(5) }),
        0,
        'The daily maintenance failed (retention sweep or inbox check).',
        {},
        of(props.maintenance),
      );
    }

    // Dead-lettering itself fails: the parking lot refused a park (the consumers' ParkRefused).
    const transport = props.queues ? 'sqs' : props.brokerQueues ? 'rabbitmq' : undefined;
    if (transport) {
      const refused = new Metric({
        namespace: METRICS_NAMESPACE,
        metricName: CONSUMER_METRICS.parkRefused,
        dimensionsMap: { service: CONSUMER_METRICS_SERVICE, Transport: transport },
        statistic: 'Sum',
        period: Duration.minutes(5),
      });
      const parking = props.brokerQueues?.parking ?? 'the parking queue';
      alarm(
        'ParkRefused',
        refused,
        0,
        transport === 'sqs'
          ? `The inventory consumer could not park a message: the send to the parking queue failed, so the message is neither processed nor parked (it comes back after its visibility timeout; the queue's redrive policy may move it without its diagnosis).`
          : `The inventory consumer could not park a message: its copy to ${parking} was not confirmed (the parking binding or queue is missing, or the queue is at its bound), so the broker holds it for dead lettering or the Amazon MQ batch goes back.`,
      );
    }
    if (props.brokerQueues) {
      alarm(
        'HeldForDeadLettering',
        relayMetric(
          QUEUE_METRICS.heldForDeadLettering,
          { Queue: props.brokerQueues.source },
          'Maximum',
        ),
        0,
        `Messages of ${props.brokerQueues.source} are held for dead lettering: parking refused them (its route or queue is missing, or it is at its bound), so they are neither delivered nor parked.`,
      );
    }

    // Bounded queues and missing routes.
    if (props.bounds) {
      this.alarms.push(...addQueueBoundAlarms(this, action, props.bounds, values));
    }
  }
}
