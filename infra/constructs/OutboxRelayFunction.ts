import { Duration, Stack } from 'aws-cdk-lib';
import { type Alarm, ComparisonOperator, TreatMissingData } from 'aws-cdk-lib/aws-cloudwatch';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { CfnFunction, Function as LambdaFunctionConstruct } from 'aws-cdk-lib/aws-lambda';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { StringParameter } from 'aws-cdk-lib/aws-ssm';
import type { Construct } from 'constructs';
import { functionEnvironment } from '../../shared/config/functionEnvironment.js';
import { OUTBOX_METRICS } from '../../shared/outbox/metrics.js';
import { DEFAULT_RELAY_SETTINGS, type RelaySettings } from '../../shared/outbox/relaySettings.js';
import { QUEUE_METRICS } from '../../shared/transport/rabbitmq/constants.js';
import { type AmazonMqAccess, amazonMqEnvironment } from './amazonMq.js';
import { type DataApiLogin, dataApiEnvironment } from './databaseAccess.js';
import { grantSendTo } from './EventTopic.js';
import { NodeFunction, type NodeFunctionProps } from './NodeFunction.js';
import {
  type AlarmSpec,
  functionValues,
  type PipelineAlarms,
  relayMetric,
} from './PipelineAlarms.js';
import { runbookSection } from './runbook.js';

/** The outbox relay: your relay's handler, how it runs, what it reaches. */
export interface OutboxRelayFunctionProps
  extends Omit<NodeFunctionProps, 'timeoutSeconds' | 'network'> {
  /** Default 60 (the drain budget's 50 s and the transaction deadline's margin). */
  timeoutSeconds?: number;
  /** How it runs (default `DEFAULT_RELAY_SETTINGS`). */
  settings?: Partial<RelaySettings>;
  /** The database login it claims outbox rows with. */
  database?: DataApiLogin;
  /** The broker it publishes to (Amazon MQ for RabbitMQ): its user, endpoints and network. */
  broker?: AmazonMqAccess;
  /** The SQS queues it publishes to, and the SNS topics of fan-out streams. */
  publishesTo?: readonly (IQueue | ITopic)[];
  /** The functions that kick it after a COMMIT that wrote outbox rows (also: `addProducer`). */
  producers?: readonly LambdaFunctionConstruct[];
}

/** Which alarms of the relay, with which thresholds. */
export interface RelayAlarmOptions {
  /**
   * The outbox tables it relays: five alarms each (heartbeat, round errors, backlog, oldest
   * unpublished, rows needing attention), their ids prefixed by the table's name without
   * `_outbox` (none for `outbox`). Default `['outbox']`.
   */
  outboxes?: readonly string[];
  /**
   * It reads an Amazon MQ broker's queue depths (the consumers' alarms there watch them):
   * QueueMetricsUnavailable when it cannot.
   */
  brokerQueueMetrics?: { brokerId?: string };
  /** Rows (default 1,000). */
  outboxBacklog?: number;
  /** Seconds (default 120). */
  oldestUnpublishedSeconds?: number;
}

/**
 * Appended to the alarms on the outbox gauges: only runs that read the outboxes publish them (a
 * kicked run, a sweep; every minute while rows are left, hourly at rest), so missing data is not
 * breaching there, and a stopped relay is the heartbeat's alarm.
 */
const FROM_RUNS =
  ' (Reported by each relay run that reads the outboxes: every minute while rows are left, at least hourly at rest; a stopped relay raises RelayHeartbeat.)';

/**
 * The outbox relay's function and how it is invoked (docs/outbox-relay.md, "Running it"):
 * - kicked: each producer invokes it asynchronously right after a COMMIT that wrote outbox rows
 *   (`RELAY_FUNCTION_NAME`, `lambda:InvokeFunction` on the function itself);
 * - ticked: a 1-minute schedule (`RelaySchedule`, beside it in `scope`), whose invocation publishes
 *   the heartbeat and reads the outboxes only when its state says rows were left or a quiet
 *   pipeline's sweep is due; the state is an SSM parameter (`RelayState`, named
 *   `/<stack>/<id>/state`) only the relay reads and writes;
 * - bounded, when `reservedConcurrency` is set: that many invocations at most. An asynchronous
 *   event is not retried and kept at most a minute (a kick throttled for longer is covered by the
 *   relays running then).
 * One relay per scope (the ids of its schedule and state are fixed).
 */
export class OutboxRelayFunction extends NodeFunction {
  /** How it runs: the defaults with the given settings over them. */
  readonly settings: RelaySettings;
  /** Its state between invocations (an SSM parameter it alone reads and writes). */
  readonly state: StringParameter;
  /** The 1-minute tick. */
  readonly schedule: Rule;

  constructor(scope: Construct, id: string, props: OutboxRelayFunctionProps) {
    const { settings: given, database, broker, publishesTo, producers, ...fn } = props;
    const settings: RelaySettings = { ...DEFAULT_RELAY_SETTINGS, ...given };
    super(scope, id, {
      ...fn,
      timeoutSeconds: props.timeoutSeconds ?? 60,
      ...(broker ? { network: broker.network } : {}),
      environment: {
        ...(database ? dataApiEnvironment(database) : {}),
        ...(broker ? amazonMqEnvironment(broker) : {}),
        ...functionEnvironment({ relay: settings }),
        ...props.environment,
      },
    });
    this.settings = settings;
    database?.grant(this);
    broker?.secret.grantRead(this);
    for (const target of publishesTo ?? []) grantSendTo(target, this);

    const stack = Stack.of(this);
    this.state = new StringParameter(scope, 'RelayState', {
      // named: a generated name is fine for CloudFormation, but moto's cannot make one
      parameterName: `/${stack.stackName}/${id}/state`,
      description:
        "The outbox relay's state between invocations (last run on the database, last traffic, rows left): written by the relay only.",
      stringValue: '{}',
    });
    this.state.grantRead(this);
    this.state.grantWrite(this);
    this.addEnvironment('RELAY_STATE_PARAMETER', this.state.parameterName);
    // 0 leaves it unreserved: an account can reserve only its unreserved concurrency minus 100
    // (docs/aws-facts.md), which a new account with a low limit does not have
    if (settings.reservedConcurrency > 0) {
      (this.node.defaultChild as CfnFunction).reservedConcurrentExecutions =
        settings.reservedConcurrency;
    }
    this.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.minutes(1) });
    for (const producer of producers ?? []) this.addProducer(producer);
    this.schedule = new Rule(scope, 'RelaySchedule', {
      schedule: Schedule.rate(Duration.minutes(1)),
      targets: [new LambdaFunction(this)],
    });
  }

  /**
   * A function that kicks the relay after a COMMIT that wrote outbox rows: it may invoke the
   * function itself, unqualified (grantInvoke would add its versions, `arn:…:*`), and gets its name
   * and the kick interval. Nothing when the settings say `kick: false`.
   */
  addProducer(producer: LambdaFunctionConstruct): void {
    if (!this.settings.kick) return;
    producer.addToRolePolicy(
      new PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [this.functionArn] }),
    );
    producer.addEnvironment('RELAY_FUNCTION_NAME', this.functionName);
    producer.addEnvironment('RELAY_KICK_INTERVAL_MS', String(this.settings.kickIntervalMs));
  }

  /**
   * The relay's alarms in `alarms`: for each outbox, its heartbeat is missing (the only alarm on
   * which missing data is breaching: a stopped relay raises it), its rounds fail, its backlog
   * grows, a row waits too long or needs attention; the function fails; and, reading a broker, the
   * queue depths cannot be read. The relay's Lambda `Throttles` has no alarm: producers kick it
   * beyond a reserved concurrency on purpose, and a relay that cannot run at all misses its
   * heartbeat.
   */
  addAlarms(alarms: PipelineAlarms, options: RelayAlarmOptions = {}): Alarm[] {
    const added: Alarm[] = [];
    const relay = functionValues(this);
    if (options.brokerQueueMetrics) {
      const { brokerId } = options.brokerQueueMetrics;
      added.push(
        alarms.addAlarm('QueueMetricsUnavailable', {
          metric: relayMetric(QUEUE_METRICS.available, {}, 'Maximum'),
          threshold: 1,
          meaning:
            'For 5 minutes no relay run could read the broker’s queue depths and routes (broker or management API unreachable, broker credentials refused): the depth alarms are blind meanwhile.',
          comparison: ComparisonOperator.LESS_THAN_THRESHOLD,
          values: brokerId ? { broker: brokerId } : {},
        }),
      );
    }
    for (const table of options.outboxes ?? ['outbox']) {
      const prefix = outboxAlarmPrefix(table);
      const outbox = (metricName: string, statistic: string) =>
        relayMetric(metricName, { Outbox: table }, statistic);
      const alarm = (
        kind:
          | 'RelayHeartbeat'
          | 'RelayRoundErrors'
          | 'OutboxBacklog'
          | 'OutboxOldestUnpublished'
          | 'OutboxNeedsAttention',
        spec: Omit<AlarmSpec, 'runbook'>,
      ) => {
        const id = `${prefix}${kind}`;
        added.push(alarms.addAlarm(id, { ...spec, runbook: runbookSection(id, kind) }));
      };
      alarm('RelayHeartbeat', {
        metric: outbox(OUTBOX_METRICS.heartbeat, 'Sum'),
        threshold: 1,
        meaning: `The relay has not reported on ${table} for 5 minutes: it is not running (schedule disabled, failing at start, throttled: no invocation got through).`,
        treatMissingData: TreatMissingData.BREACHING,
        comparison: ComparisonOperator.LESS_THAN_THRESHOLD,
        values: relay,
      });
      alarm('RelayRoundErrors', {
        metric: outbox(OUTBOX_METRICS.roundErrors, 'Sum'),
        threshold: 0,
        meaning: `Relay rounds on ${table} fail (database trouble, a bug): the relay logs and retries them, so Lambda's Errors stays 0.`,
        values: relay,
      });
      alarm('OutboxBacklog', {
        metric: outbox(OUTBOX_METRICS.backlog, 'Minimum'),
        threshold: options.outboxBacklog ?? 1_000,
        meaning: `The ${table} backlog stays high.${FROM_RUNS}`,
      });
      alarm('OutboxOldestUnpublished', {
        metric: outbox(OUTBOX_METRICS.oldestAge, 'Maximum'),
        threshold: options.oldestUnpublishedSeconds ?? 120,
        meaning: `An event in ${table} has waited too long to be published.${FROM_RUNS}`,
      });
      alarm('OutboxNeedsAttention', {
        metric: outbox(OUTBOX_METRICS.needsAttention, 'Maximum'),
        threshold: 0,
        meaning: `Rows in ${table} need attention. At rest the hourly sweep reports them again (one notification an hour while they wait).${FROM_RUNS}`,
      });
    }
    added.push(
      alarms.addFunctionErrorsAlarm(
        'RelayErrors',
        this,
        'The outbox relay failed (a timeout or a start-up failure: round errors have their own alarm).',
      ),
    );
    return added;
  }
}

/** `outbox` → ``, `inventory_outbox` → `Inventory`, `shipping_events` → `ShippingEvents`. */
export function outboxAlarmPrefix(table: string): string {
  return table
    .replace(/_?outbox$/, '')
    .split(/[^A-Za-z0-9]+/)
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('');
}
