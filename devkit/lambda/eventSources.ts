import type { ScheduledEvent } from 'aws-lambda';
import type { Logger } from '../../shared/logger.js';
import { amqpUrlForVhost, RabbitConnection } from '../../shared/transport/rabbitmq/index.js';
import { AmazonMqTrigger } from '../triggers/amazonMqTrigger.js';
import { ScheduleTrigger } from '../triggers/scheduleTrigger.js';
import { startSqsTrigger } from '../triggers/sqsTrigger.js';
import {
  type AmazonMqEventSource,
  amazonMqEventSourceOf,
  type ScheduleRule,
  type SqsEventSource,
  scheduleOf,
  sqsEventSourceOf,
} from './deployedSettings.js';
import { type LambdaFunction, LambdaFunctionError } from './LambdaFunction.js';
import type { LocalDeployment } from './LocalDeployment.js';

/**
 * The deployment's triggers in front of its bundles, each configured from the template: the SQS
 * and Amazon MQ event source mappings (trigger emulations in devkit/triggers) and the schedule
 * rules. What AWS documents but a template leaves out takes Lambda's default
 * (deployedSettings.ts); what AWS does not document is an emulation choice (docs/aws-facts.md).
 */
export interface RunningEventSource {
  readonly stats: {
    batches?: number;
    messages?: number;
    largestBatch?: number;
    givenBack?: number;
    invocations?: number;
  };
  /** The settings it runs with, as read from the template. */
  readonly settings: SqsEventSource | AmazonMqEventSource | ScheduleRule;
  stop(): Promise<void>;
}

/**
 * Invokes a bundle as an event source does (synchronously): a function error throws, after
 * `onError` heard of it.
 */
const invoker =
  (fn: LambdaFunction, onError?: (err: Error) => void) =>
  async <R>(event: unknown): Promise<R> => {
    const outcome = await fn.invoke(event);
    if (!outcome.ok) {
      const err = new LambdaFunctionError(fn.spec.name, outcome.error);
      onError?.(err);
      throw err;
    }
    return outcome.payload as R;
  };

export interface EventSourceOptions {
  logger?: Logger;
  /** Called for each invocation that failed (the batch goes back), before the trigger reacts. */
  onInvocationError?: (err: Error) => void;
}

/**
 * Lambda's SQS poller scales from 5 concurrent invocations upwards (Lambda DG, SQS scaling); a
 * mapping without `MaximumConcurrency` runs with that many here (no scaling is emulated).
 */
export const SQS_UNSCALED_CONCURRENCY = 5;

/** The SQS event source mapping of `functionId`, polling its queue on the local SQS server. */
export async function startSqsEventSource(
  d: LocalDeployment,
  functionId: string,
  options: EventSourceOptions = {},
): Promise<RunningEventSource> {
  const settings = sqsEventSourceOf(d.settings, functionId);
  const queue = d.queue(settings.queueName);
  const trigger = await startSqsTrigger(
    { endpoint: d.sqsEndpoint, region: d.region },
    { handler: invoker(d.fn(functionId), options.onInvocationError), logger: options.logger },
    {
      queueUrl: queue.url,
      queueArn: queue.arn,
      region: d.region,
      batchSize: settings.batchSize,
      batchWindowMs: settings.batchWindowMs,
      maxConcurrency: settings.maxConcurrency ?? SQS_UNSCALED_CONCURRENCY,
      functionTimeoutMs: settings.functionTimeoutMs,
      reportBatchItemFailures: settings.reportBatchItemFailures,
      functionName: functionId,
    },
    settings.enabled,
  );
  return { settings, stats: trigger.stats, stop: () => trigger.stop() };
}

/**
 * The Amazon MQ event source mapping of `functionId`: consumes its queue on the local broker as
 * the user of its `BASIC_AUTH` secret (read from the local Secrets Manager), in its
 * `VIRTUAL_HOST` (or `vhost`, for isolation).
 */
export async function startAmazonMqEventSource(
  d: LocalDeployment,
  functionId: string,
  options: EventSourceOptions & { amqpUrl: string; vhost?: string },
): Promise<RunningEventSource> {
  const settings = amazonMqEventSourceOf(d.settings, functionId);
  const stack = settings.function.stack;
  const secretArn = String(
    d.resolve(stack, settings.basicAuthSecret, `${settings.logicalId}.BASIC_AUTH`),
  );
  const vhost = options.vhost ?? settings.vhost;
  const connection = new RabbitConnection({
    url: async () => {
      const secret = await d.secretValue(secretArn);
      const u = new URL(amqpUrlForVhost(options.amqpUrl, vhost));
      u.username = encodeURIComponent(String(secret.username));
      u.password = encodeURIComponent(String(secret.password));
      return u.toString();
    },
    connectionName: `amazon-mq-event-source ${settings.logicalId}`,
  });
  const trigger = new AmazonMqTrigger(
    {
      broker: connection,
      handler: invoker(d.fn(functionId), options.onInvocationError),
      logger: options.logger,
    },
    {
      queue: settings.queue,
      vhost,
      batchSize: settings.batchSize,
      batchWindowMs: settings.batchWindowMs,
      functionTimeoutMs: settings.functionTimeoutMs,
      eventSourceArn: String(
        d.resolve(stack, { 'Fn::GetAtt': [settings.broker, 'Arn'] }, settings.logicalId),
      ),
      functionName: functionId,
    },
  );
  try {
    if (settings.enabled) await trigger.start();
  } catch (err) {
    await connection.close().catch(() => {});
    throw err;
  }
  return {
    settings,
    stats: trigger.stats,
    async stop() {
      await trigger.stop();
      await connection.close();
    },
  };
}

/** The schedule rule targeting `functionId`, invoking its bundle at the rule's rate. */
export function startSchedule(
  d: LocalDeployment,
  functionId: string,
  options: { logger?: Logger; immediately?: boolean } = {},
): RunningEventSource {
  const settings = scheduleOf(d.settings, functionId);
  if (settings.rateMs === undefined) {
    throw new Error(`${settings.logicalId}: ${settings.expression} is not emulated (rate only)`);
  }
  const trigger = new ScheduleTrigger(
    {
      handler: (event: ScheduledEvent) => invoker(d.fn(functionId))(event),
      logger: options.logger,
    },
    {
      rateMs: settings.rateMs,
      ruleArn: String(
        d.resolve(
          settings.stack,
          { 'Fn::GetAtt': [settings.logicalId, 'Arn'] },
          settings.logicalId,
        ),
      ),
      region: d.region,
      immediately: options.immediately,
    },
  );
  if (settings.enabled) trigger.start();
  return { settings, stats: trigger.stats, stop: () => trigger.stop() };
}
