import { Duration, Validations } from 'aws-cdk-lib';
import type { Alarm } from 'aws-cdk-lib/aws-cloudwatch';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { CfnEventSourceMapping } from 'aws-cdk-lib/aws-lambda';
import type { Construct, IDependable } from 'constructs';
import type { Retention, RetryBudget } from '../../shared/config/env.js';
import { AMAZON_MQ_TRIGGER, QUEUE_METRICS } from '../../shared/transport/rabbitmq/constants.js';
import { type AmazonMqAccess, brokerFunctionEnvironment } from './amazonMq.js';
import {
  type ConsumerAlarmOptions,
  consumerAlarmAdder,
  NEW_PARKED,
  PARKED,
} from './consumerAlarms.js';
import { type DataApiLogin, dataApiEnvironment } from './databaseAccess.js';
import { NodeFunction, type NodeFunctionProps } from './NodeFunction.js';
import {
  FROM_BROKER,
  functionValues,
  NEW_ARRIVALS,
  newArrivals,
  type PipelineAlarms,
  relayMetric,
} from './PipelineAlarms.js';

/** A consumer of a RabbitMQ queue on Amazon MQ: your handler, the broker, the event source. */
export interface AmazonMqConsumerProps
  extends Omit<NodeFunctionProps, 'timeoutSeconds' | 'network'> {
  /** Default 30. */
  timeoutSeconds?: number;
  /** The broker, as the user the function and its event source read it with. */
  broker: AmazonMqAccess;
  /** The queue the event source reads. */
  queue: string;
  /** Its parking queue, whose depth the alarms watch (default `<queue>.parking`). */
  parkingQueue?: string;
  /** Messages per invocation (default 100). */
  batchSize?: number;
  /** Whole seconds; unset, Lambda's default of 500 ms. */
  maxBatchingWindowSeconds?: number;
  /** The event source's construct id, beside the function in `scope` (default `<id>Trigger`). */
  triggerId?: string;
  /**
   * What must exist before the event source starts reading: the queue and its policies (e.g.
   * `BrokerSetup.topology`).
   */
  dependsOn?: readonly IDependable[];
  /** The retry budget and retention it runs with (its environment; default the library's). */
  budget?: RetryBudget;
  retention?: Retention;
  /** The database login it records its inbox and effects with. */
  database?: DataApiLogin;
}

/**
 * A consumer of a queue of an Amazon MQ for RabbitMQ broker: its function (`entry`, your handler)
 * in the broker's private subnets, and beside it in `scope` the Amazon MQ event source
 * (`BASIC_AUTH` with the broker user's secret, `VIRTUAL_HOST`), created after what it depends on
 * (the topology). The function reads the broker with its role: it may describe the broker, read
 * the user's secret and manage its network interfaces in the broker's subnets.
 */
export class AmazonMqConsumer extends NodeFunction {
  /** The Amazon MQ event source. */
  readonly eventSourceMapping: CfnEventSourceMapping;
  /** The queue it reads. */
  readonly queueName: string;
  /** Its parking queue (the alarms'). */
  readonly parkingQueueName: string;

  constructor(scope: Construct, id: string, props: AmazonMqConsumerProps) {
    const {
      broker,
      queue,
      parkingQueue,
      batchSize,
      maxBatchingWindowSeconds,
      triggerId,
      dependsOn,
      budget,
      retention,
      database,
      ...fn
    } = props;
    super(scope, id, {
      ...fn,
      timeoutSeconds: props.timeoutSeconds ?? 30,
      network: broker.network,
      environment: {
        ...brokerFunctionEnvironment(broker, { budget, retention }),
        ...(database ? dataApiEnvironment(database) : {}),
        ...props.environment,
      },
    });
    this.queueName = queue;
    this.parkingQueueName = parkingQueue ?? `${queue}.parking`;
    database?.grant(this);
    broker.secret.grantRead(this);
    // The Amazon MQ event source reads the broker with the function's role: describe the broker,
    // read its secret (above), and manage its network interfaces in the broker's subnets.
    this.addToRolePolicy(
      new PolicyStatement({ actions: ['mq:DescribeBroker'], resources: [broker.brokerArn] }),
    );
    this.addToRolePolicy(
      new PolicyStatement({
        actions: [
          'ec2:CreateNetworkInterface',
          'ec2:DeleteNetworkInterface',
          'ec2:DescribeNetworkInterfaces',
          'ec2:DescribeSecurityGroups',
          'ec2:DescribeSubnets',
          'ec2:DescribeVpcs',
        ],
        resources: ['*'],
      }),
    );
    Validations.of(this).acknowledge({
      id: 'AwsSolutions::AwsSolutions-IAM5[Resource::*]',
      reason:
        'The Amazon MQ event source needs EC2 network-interface and Describe* actions, which support no resource-level scoping.',
    });
    this.eventSourceMapping = new CfnEventSourceMapping(scope, triggerId ?? `${id}Trigger`, {
      functionName: this.functionName,
      eventSourceArn: broker.brokerArn,
      queues: [queue],
      batchSize: batchSize ?? AMAZON_MQ_TRIGGER.batchSize,
      // whole seconds only: Lambda's default (500 ms) is had by leaving it unset
      maximumBatchingWindowInSeconds: maxBatchingWindowSeconds,
      sourceAccessConfigurations: [
        { type: 'BASIC_AUTH', uri: broker.secret.secretArn },
        { type: 'VIRTUAL_HOST', uri: broker.vhost },
      ],
    });
    // the queue exists (and has its policies) before the event source starts reading it
    for (const dependency of dependsOn ?? [])
      this.eventSourceMapping.node.addDependency(dependency);
    this.eventSourceMapping.node.addDependency(this);
  }

  /**
   * The consumer's alarms in `alarms`, on the queue depths the outbox relay reads from the broker
   * (Amazon MQ vends no per-queue CloudWatch metrics for RabbitMQ 4; the relay's
   * `brokerQueueMetrics` alarm fires when it cannot read them): messages are in
   * (`ParkedMessages`) or newly arrived in (`NewParkedMessages`) its parking queue, its ready
   * backlog grows (`ConsumerBacklog`), its function fails, its parking refused a park
   * (`ParkRefused`) and messages are held for dead lettering (`HeldForDeadLettering`).
   */
  addAlarms(alarms: PipelineAlarms, options: ConsumerAlarmOptions = {}): Alarm[] {
    const { add, errors, parkRefused, added, backlog } = consumerAlarmAdder(
      alarms,
      'rabbitmq',
      options,
    );
    const parking = this.parkingQueueName;
    const depth = (metricName: string, queue: string, period?: Duration) =>
      relayMetric(metricName, { Queue: queue }, 'Maximum', period);
    add('ParkedMessages', {
      metric: depth(QUEUE_METRICS.depth, parking),
      threshold: 0,
      meaning: PARKED + FROM_BROKER,
    });
    add('NewParkedMessages', {
      metric: newArrivals(depth(QUEUE_METRICS.depth, parking, Duration.minutes(1))),
      threshold: 0,
      meaning: NEW_PARKED,
      ...NEW_ARRIVALS,
    });
    add('ConsumerBacklog', {
      metric: depth(QUEUE_METRICS.ready, this.queueName),
      threshold: backlog,
      meaning: `Messages pile up in the consumer queue (RabbitMQ has no oldest-message age metric).${FROM_BROKER}`,
      values: functionValues(this),
    });
    errors(this);
    parkRefused(
      `its copy to ${parking} was not confirmed (the parking binding or queue is missing, or the queue is at its bound), so the broker holds it for dead lettering or the Amazon MQ batch goes back.`,
    );
    add('HeldForDeadLettering', {
      metric: depth(QUEUE_METRICS.heldForDeadLettering, this.queueName),
      threshold: 0,
      meaning: `Messages of ${this.queueName} are held for dead lettering: parking refused them (its route or queue is missing, or it is at its bound), so they are neither delivered nor parked.`,
    });
    return added;
  }
}
