import { Duration, Names, Stack } from 'aws-cdk-lib';
import type { Alarm } from 'aws-cdk-lib/aws-cloudwatch';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import type { ITopic, Subscription } from 'aws-cdk-lib/aws-sns';
import { type CfnQueue, type IQueue, Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import {
  DEFAULT_RETENTION,
  DEFAULT_RETRY_BUDGET,
  type Retention,
  type RetryBudget,
} from '../../shared/config/env.js';
import { ConfigError } from '../../shared/config/errors.js';
import { functionEnvironment } from '../../shared/config/functionEnvironment.js';
import { visibilityTimeoutRule } from '../../shared/config/rules.js';
import {
  type ConsumerAlarmOptions,
  consumerAlarmAdder,
  NEW_PARKED,
  PARKED,
} from './consumerAlarms.js';
import { type DataApiLogin, dataApiEnvironment } from './databaseAccess.js';
import { grantSendTo, subscribeQueue } from './EventTopic.js';
import { NodeFunction, type NodeFunctionProps } from './NodeFunction.js';
import {
  functionValues,
  NEW_ARRIVALS,
  newArrivals,
  type PipelineAlarms,
} from './PipelineAlarms.js';

/** One of the consumer's queues. */
export interface SqsQueueOptions {
  /** Its construct id, beside the function in `scope` (default `<id>Queue`, `<id>Parking`). */
  id?: string;
  /**
   * Its name (default: the source queue's generated from the construct's path, the parking
   * queue's `<source queue name>-parking`).
   */
  queueName?: string;
  /**
   * How long SQS keeps a message (default: the parking queue the retention's `parkingMs`; the
   * source queue that, at most SQS's 14 days). The source queue's must not exceed the parking
   * queue's: a message the redrive policy moves keeps its enqueue time there.
   */
  retention?: Duration;
}

/** The SQS event source. */
export interface SqsTriggerOptions {
  /** Messages per invocation (default 10). */
  batchSize?: number;
  /** Seconds (default 0: none). */
  maxBatchingWindowSeconds?: number;
  /** Concurrent invocations the event source starts at most (default 5). */
  maxConcurrency?: number;
}

/** A consumer of an SQS queue: your handler, its queues, its event source, its settings. */
export interface SqsConsumerProps extends Omit<NodeFunctionProps, 'timeoutSeconds' | 'network'> {
  /** Default 30. */
  timeoutSeconds?: number;
  /** The source queue. */
  queue?: SqsQueueOptions & {
    /** At least 6 × the function's timeout, AWS's rule (default: exactly that). */
    visibilityTimeoutSeconds?: number;
    /**
     * Receives before SQS moves a message to the parking queue: its safety net, above the retry
     * budget the consumer parks by (default: the budget's `maxAttempts` + 3).
     */
    maxReceiveCount?: number;
  };
  /** The parking queue. */
  parking?: SqsQueueOptions;
  /** The event source's settings. */
  trigger?: SqsTriggerOptions;
  /**
   * How it retries a message later: `visibility` (the default: the message's visibility timeout)
   * or `resend` (a delayed copy sent to its own queue).
   */
  retryMode?: 'visibility' | 'resend';
  /** The retry budget and retention it runs with (its environment; default the library's). */
  budget?: RetryBudget;
  retention?: Retention;
  /** The database login it records its inbox and effects with. */
  database?: DataApiLogin;
  /** Queues and topics it sends to besides its parking queue (e.g. its results). */
  sendsTo?: readonly (IQueue | ITopic)[];
}

/** How an SQS consumer's alarms are named and set. */
export interface SqsConsumerAlarmOptions extends ConsumerAlarmOptions {
  /** The oldest message's age in its queue, seconds (default 300). */
  oldestMessageSeconds?: number;
}

const MAX_SQS_RETENTION = Duration.days(14);

/**
 * A consumer of an SQS queue: its function (`entry`, your handler), beside it in `scope` the
 * source queue and the parking queue (SQS-managed encryption, TLS only; the source's redrive
 * policy moves a message received `maxReceiveCount` times to parking, and only the source may
 * dead-letter into parking, by its ARN), and the SQS event source with partial batch responses
 * (`ReportBatchItemFailures`). The settings are checked at synth: a visibility timeout below 6 ×
 * the function's timeout, or a source retention above the parking retention, fails it
 * (`ConfigError`). The function gets its queues' URLs, the retry mode and visibility timeout
 * (`functionEnvironment`), consume on its queue, send to parking (and to its queue in resend mode).
 */
export class SqsConsumer extends NodeFunction {
  /** The source queue the event source reads. */
  readonly queue: Queue;
  /** Where the consumer parks a message, and the source's redrive policy moves one. */
  readonly parkingQueue: Queue;
  readonly eventSource: SqsEventSource;
  /** The source queue's visibility timeout (at least 6 × the function's timeout). */
  readonly visibilityTimeoutSeconds: number;

  constructor(scope: Construct, id: string, props: SqsConsumerProps) {
    const {
      queue: queueOptions = {},
      parking: parkingOptions = {},
      trigger = {},
      retryMode = 'visibility',
      budget,
      retention,
      database,
      sendsTo,
      ...fn
    } = props;
    const timeoutSeconds = props.timeoutSeconds ?? 30;
    const visibilityTimeoutSeconds = queueOptions.visibilityTimeoutSeconds ?? 6 * timeoutSeconds;
    const visibility = visibilityTimeoutRule(
      visibilityTimeoutSeconds,
      timeoutSeconds * 1000,
      'timeoutSeconds',
    );
    if (visibility) {
      throw new ConfigError(
        `SqsConsumer ${id}: queue.visibilityTimeoutSeconds: ${visibilityTimeoutSeconds} s ${visibility}`,
      );
    }
    const parkingRetention =
      parkingOptions.retention ?? Duration.millis((retention ?? DEFAULT_RETENTION).parkingMs);
    const sourceRetention =
      queueOptions.retention ??
      Duration.seconds(
        Math.min(
          MAX_SQS_RETENTION.toSeconds(),
          Math.floor(parkingRetention.toMilliseconds() / 1000),
        ),
      );
    if (sourceRetention.toMilliseconds() > parkingRetention.toMilliseconds()) {
      throw new ConfigError(
        `SqsConsumer ${id}: queue.retention (${sourceRetention.toHumanString()}) must be at most the parking queue's (${parkingRetention.toHumanString()}): a message moved to parking by the redrive policy keeps its enqueue time there`,
      );
    }
    super(scope, id, {
      ...fn,
      timeoutSeconds,
      environment: {
        ...functionEnvironment({
          transport: 'sqs',
          ...(budget ? { budget } : {}),
          ...(retention ? { retention } : {}),
          sqs: { retryMode, visibilityTimeoutSeconds },
        }),
        ...(database ? dataApiEnvironment(database) : {}),
        ...props.environment,
      },
    });
    this.visibilityTimeoutSeconds = visibilityTimeoutSeconds;
    database?.grant(this);

    const queueName =
      queueOptions.queueName ?? Names.uniqueResourceName(this, { maxLength: 72, separator: '-' });
    this.parkingQueue = new Queue(scope, parkingOptions.id ?? `${id}Parking`, {
      queueName: parkingOptions.queueName ?? `${queueName}-parking`,
      retentionPeriod: parkingRetention,
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    this.queue = new Queue(scope, queueOptions.id ?? `${id}Queue`, {
      queueName,
      visibilityTimeout: Duration.seconds(visibilityTimeoutSeconds),
      retentionPeriod: sourceRetention,
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      deadLetterQueue: {
        queue: this.parkingQueue,
        maxReceiveCount:
          queueOptions.maxReceiveCount ?? (budget ?? DEFAULT_RETRY_BUDGET).maxAttempts + 3,
      },
    });
    // Only the source queue may dead-letter into parking. CDK builds RedriveAllowPolicy from queue
    // objects, which would make the two queues depend on each other: set it by ARN.
    (this.parkingQueue.node.defaultChild as CfnQueue).redriveAllowPolicy = {
      redrivePermission: 'byQueue',
      sourceQueueArns: [Stack.of(this).formatArn({ service: 'sqs', resource: queueName })],
    };
    for (const [name, value] of Object.entries(
      functionEnvironment({
        sqs: { sourceQueueUrl: this.queue.queueUrl, parkingQueueUrl: this.parkingQueue.queueUrl },
      }),
    )) {
      this.addEnvironment(name, value);
    }

    this.queue.grantConsumeMessages(this);
    // resend mode sends its delayed copies to its queue; visibility mode never sends there
    if (retryMode === 'resend') this.queue.grantSendMessages(this);
    this.parkingQueue.grantSendMessages(this);
    for (const target of sendsTo ?? []) grantSendTo(target, this);
    this.eventSource = sqsEventSource(this.queue, trigger);
    this.addEventSource(this.eventSource);
  }

  /**
   * Subscribes the source queue to a stream's topic (fan-out on SQS): raw delivery, `types` as a
   * filter policy, the parking queue as the subscription's dead-letter queue (what SNS could not
   * deliver is parked, and the parking alarms say so).
   */
  subscribeTo(topic: ITopic, options: { types?: readonly string[] } = {}): Subscription {
    return subscribeQueue(topic, this.queue, { ...options, deadLetterQueue: this.parkingQueue });
  }

  /**
   * The consumer's alarms in `alarms`: messages are in (`ParkedMessages`) or newly arrived in
   * (`NewParkedMessages`) its parking queue, its oldest message is too old (`OldestMessageAge`; it
   * leaves out messages received three times or more) or its visible backlog grows
   * (`ConsumerBacklog`, poison included), its function fails, and its parking refused a park
   * (`ParkRefused`).
   */
  addAlarms(alarms: PipelineAlarms, options: SqsConsumerAlarmOptions = {}): Alarm[] {
    const { add, errors, parkRefused, added, backlog } = consumerAlarmAdder(alarms, 'sqs', options);
    const parkingDepth = this.parkingQueue.metricApproximateNumberOfMessagesVisible({
      period: Duration.minutes(1),
      statistic: 'Maximum',
    });
    add('ParkedMessages', { metric: parkingDepth, threshold: 0, meaning: PARKED });
    // NumberOfMessagesSent leaves out messages SQS moves there by the redrive policy: watch the
    // depth's rise instead, which sees both the consumer's parking and the safety net.
    add('NewParkedMessages', {
      metric: newArrivals(parkingDepth),
      threshold: 0,
      meaning: NEW_PARKED,
      ...NEW_ARRIVALS,
    });
    add('OldestMessageAge', {
      metric: this.queue.metricApproximateAgeOfOldestMessage({
        period: Duration.minutes(1),
        statistic: 'Maximum',
      }),
      threshold: options.oldestMessageSeconds ?? 300,
      meaning: 'The oldest message waiting for the consumer is too old.',
      values: functionValues(this),
    });
    add('ConsumerBacklog', {
      metric: this.queue.metricApproximateNumberOfMessagesVisible({
        period: Duration.minutes(5),
        statistic: 'Minimum',
      }),
      threshold: backlog,
      meaning: 'Messages pile up in the consumer queue (visible backlog, poison included).',
      values: functionValues(this),
    });
    errors(this);
    parkRefused(
      "the send to the parking queue failed, so the message is neither processed nor parked (it comes back after its visibility timeout; the queue's redrive policy may move it without its diagnosis).",
    );
    return added;
  }
}

/** An SQS event source with the trigger's settings and partial batch responses. */
export function sqsEventSource(queue: IQueue, trigger: SqsTriggerOptions = {}): SqsEventSource {
  const window = trigger.maxBatchingWindowSeconds ?? 0;
  return new SqsEventSource(queue, {
    batchSize: trigger.batchSize ?? 10,
    maxBatchingWindow: window > 0 ? Duration.seconds(window) : undefined,
    maxConcurrency: trigger.maxConcurrency ?? 5,
    reportBatchItemFailures: true,
  });
}
