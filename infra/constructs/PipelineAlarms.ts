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
import { Construct } from 'constructs';
import { METRICS_NAMESPACE } from '../../shared/config/constants.js';
import { alarmDescription, type RunbookValues } from './runbook.js';

/** How one alarm evaluates (defaults: one period, greater than the threshold, missing = OK). */
export interface AlarmOptions {
  comparison?: ComparisonOperator;
  treatMissingData?: TreatMissingData;
  evaluationPeriods?: number;
  datapointsToAlarm?: number;
}

/** One alarm: what it watches, when it fires, what its description tells whoever it wakes. */
export interface AlarmSpec extends AlarmOptions {
  /** What it watches. */
  metric: IMetric;
  /** Compared with the metric by `comparison`. */
  threshold: number;
  /** What it means: the description's first sentence(s). */
  meaning: string;
  /** Its section of the runbook (default: the alarm's id): what to check, with which command. */
  runbook?: string;
  /** The runbook command's placeholders (`<function>`, `<log group>`, `<queue>`, …). */
  values?: RunbookValues;
}

/**
 * The alarms of a pipeline, on one SNS topic encrypted with a customer-managed key CloudWatch may
 * use. Each alarm's description names what it means, what to check with which command and its
 * section of the runbook (runbook.ts, docs/operations.md). The constructs add theirs
 * (`OutboxRelayFunction.addAlarms`, `SqsConsumer.addAlarms`, `AmazonMqConsumer.addAlarms`);
 * `addAlarm` adds any other (its runbook section must exist: runbook.ts). Each means one thing:
 * only the relay's heartbeat treats missing data as breaching (a stopped relay raises it), and the
 * depths the relay reads from a broker have their own "unavailable" alarm rather than breaching
 * each on a broker outage.
 */
export class PipelineAlarms extends Construct {
  /** Where every alarm notifies (subscribe to it). */
  readonly topic: Topic;
  /** The topic's key, which CloudWatch alarms of this account may use. */
  readonly key: Key;
  /** The alarms added so far. */
  readonly alarms: Alarm[] = [];
  private readonly action: SnsAction;
  private readonly values: RunbookValues;

  constructor(scope: Construct, id: string) {
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
    this.action = new SnsAction(this.topic);
    this.values = { stack: stack.stackName };
  }

  /** An alarm on the topic (`id` in this construct), its description from its runbook section. */
  addAlarm(id: string, spec: AlarmSpec): Alarm {
    const alarm = new Alarm(this, id, {
      metric: spec.metric,
      threshold: spec.threshold,
      evaluationPeriods: spec.evaluationPeriods ?? 1,
      datapointsToAlarm: spec.datapointsToAlarm,
      comparisonOperator: spec.comparison ?? ComparisonOperator.GREATER_THAN_THRESHOLD,
      treatMissingData: spec.treatMissingData ?? TreatMissingData.NOT_BREACHING,
      alarmDescription: alarmDescription(spec.meaning, spec.runbook ?? id, {
        ...this.values,
        ...spec.values,
      }),
    });
    alarm.addAlarmAction(this.action);
    this.alarms.push(alarm);
    return alarm;
  }

  /** The function failed (Lambda's `Errors` over 5 minutes); its log group in the command. */
  addFunctionErrorsAlarm(
    id: string,
    fn: LambdaFunction,
    meaning: string,
    runbook: string = id,
  ): Alarm {
    return this.addAlarm(id, {
      metric: fn.metricErrors({ period: Duration.minutes(5) }),
      threshold: 0,
      meaning,
      runbook,
      values: functionValues(fn),
    });
  }
}

/** The runbook's values for an alarm about function `fn`. */
export function functionValues(fn: LambdaFunction): RunbookValues {
  return { function: fn.functionName, 'log group': fn.logGroup.logGroupName };
}

/** The `service` dimension of what the outbox relay publishes (shared/outbox/metrics.ts). */
export const RELAY_METRICS_SERVICE = 'outbox-relay';

/** A metric the outbox relay publishes (its heartbeat, outbox gauges, a broker's queue depths). */
export function relayMetric(
  metricName: string,
  dimensions: Record<string, string>,
  statistic: string,
  period = Duration.minutes(5),
): Metric {
  return new Metric({
    namespace: METRICS_NAMESPACE,
    metricName,
    dimensionsMap: { service: RELAY_METRICS_SERVICE, ...dimensions },
    statistic,
    period,
  });
}

/**
 * New arrivals in a parking lot: the depth rose between two consecutive minutes. Two periods give
 * DIFF its preceding value inside the evaluation range; one rise is enough (`NEW_ARRIVALS`).
 */
export function newArrivals(depth: IMetric): MathExpression {
  return new MathExpression({
    expression: 'DIFF(depth)',
    usingMetrics: { depth },
    period: Duration.minutes(1),
    label: 'parking depth increase',
  });
}

/** How `newArrivals` evaluates. */
export const NEW_ARRIVALS: AlarmOptions = { evaluationPeriods: 2, datapointsToAlarm: 1 };

/**
 * Appended to the alarms on the queue depths the relay reads from the broker: while it cannot
 * (broker or management API unreachable) QueueMetricsUnavailable alone fires, and a stopped relay
 * is the heartbeat's alarm, so their missing data is not breaching.
 */
export const FROM_BROKER =
  ' (Read by the relay from the broker each minute: while it cannot, QueueMetricsUnavailable fires instead.)';
