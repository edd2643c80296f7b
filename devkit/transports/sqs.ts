import {
  GetQueueAttributesCommand,
  type MessageAttributeValue,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { createLogger } from '../../shared/logger.js';
import type { Backend, MessageHandler, RunningConsumer } from '../../shared/port/types.js';
import { SQS_ATTRIBUTES, SQS_LIMITS } from '../../shared/transport/sqs/constants.js';
import { SqsBackend, sqsLambdaHandler } from '../../shared/transport/sqs/index.js';
import { ensureLocalSqs } from '../emulators/sqsServer.js';
import { sqsEventSourceOf } from '../lambda/deployedSettings.js';
import { SQS_UNSCALED_CONCURRENCY, startSqsEventSource } from '../lambda/eventSources.js';
import { startSqsTrigger } from '../triggers/sqsTrigger.js';
import { watched } from '../triggers/watched.js';
import type { ConsumerSettings, LocalTransport, RawMessage } from './types.js';

const FUNCTIONS = { inventory: 'reserve-inventory-sqs', results: 'order-results-sqs' };

/** The reserve function for SQS behind the SQS trigger emulation (long polls on a client of its own). */
async function startSqsConsumer(
  backend: Backend,
  handler: MessageHandler,
  settings: ConsumerSettings,
): Promise<RunningConsumer> {
  if (!(backend instanceof SqsBackend)) throw new Error('not an SQS backend');
  const results = settings.queue === 'results';
  const logger = settings.logger ?? createLogger(results ? FUNCTIONS.results : FUNCTIONS.inventory);
  const { driver, mode, fifo } = await backend.lambdaDriver(handler, {
    journal: settings.journal,
    queue: results ? 'results' : 'inventory',
    notices: settings.notices,
  });
  // The order-results function composes the same handler (functions/order-results-sqs).
  const fn = sqsLambdaHandler({ driver, mode, fifo, logger });
  const queues = await backend.queues();
  const queueUrl = results ? queues.resultsUrl : queues.sourceUrl;
  const queueArn = results
    ? ((
        await backend.client.send(
          new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
        )
      ).Attributes?.QueueArn ?? '')
    : queues.sourceArn;
  return startSqsTrigger(
    { endpoint: backend.config.endpoint, region: backend.config.region },
    { handler: watched(fn, settings.onInvocationError), logger },
    {
      queueUrl,
      queueArn,
      region: backend.config.region,
      ...(settings.batchSize ? { batchSize: settings.batchSize } : {}),
      batchWindowMs: settings.batchWindowMs,
      ...(settings.concurrency ? { maxConcurrency: settings.concurrency } : {}),
      ...(settings.functionTimeoutMs ? { functionTimeoutMs: settings.functionTimeoutMs } : {}),
      reportBatchItemFailures: settings.reportBatchItemFailures,
      functionName: results ? FUNCTIONS.results : FUNCTIONS.inventory,
    },
  );
}

/** To the source queue in batches (a failed entry throws). */
async function publishRawSqs(backend: Backend, messages: readonly RawMessage[]): Promise<void> {
  if (!(backend instanceof SqsBackend)) throw new Error('not an SQS backend');
  const { sourceUrl } = await backend.queues();
  const str = (v: string): MessageAttributeValue => ({ DataType: 'String', StringValue: v });
  const entries = messages.map((m, k) => ({
    Id: String(k),
    MessageBody: m.body.toString(),
    MessageAttributes: {
      ...(m.messageId ? { [SQS_ATTRIBUTES.eventId]: str(m.messageId) } : {}),
      ...(m.type ? { [SQS_ATTRIBUTES.eventType]: str(m.type) } : {}),
      ...(m.schemaVersion ? { [SQS_ATTRIBUTES.schemaVersion]: str(m.schemaVersion) } : {}),
    },
    ...(backend.fifo
      ? { MessageGroupId: 'raw', MessageDeduplicationId: `${Date.now()}-${k}` }
      : {}),
  }));
  for (let i = 0; i < entries.length; i += SQS_LIMITS.batchEntries) {
    const out = await backend.client.send(
      new SendMessageBatchCommand({
        QueueUrl: sourceUrl,
        Entries: entries.slice(i, i + SQS_LIMITS.batchEntries),
      }),
    );
    if (out.Failed?.length) throw new Error(`send failed: ${JSON.stringify(out.Failed)}`);
  }
}

/**
 * SQS locally: `SQS_ENDPOINT`, or an embedded fauxqs server every local role shares; a queue-name
 * prefix per scratch environment.
 */
export const sqsLocal: LocalTransport = {
  name: 'sqs',
  shared: true,
  publishRaw: publishRawSqs,
  required: () => ({}),
  async startLocal(env) {
    const local = await ensureLocalSqs({ endpoint: env.SQS_ENDPOINT, port: env.SQS_LOCAL_PORT });
    return {
      config: { endpoint: local.endpoint },
      line: `sqs: ${local.embedded ? 'embedded fauxqs server' : 'server'} at ${local.endpoint}`,
      stop: () => local.stop(),
    };
  },
  async namespace(services, name) {
    const config = services.sqsEndpoint
      ? {
          endpoint: services.sqsEndpoint,
          region: 'us-east-1',
          prefix: `${name.replace(/_/g, '-')}-`,
          mode: 'visibility',
        }
      : {};
    return { config, delete: async () => {} };
  },
  deployed: {
    stack: 'sqs',
    functions: FUNCTIONS,
    emulate: startSqsConsumer,
    triggerSettings(deployed, functionId, env, functionEnv) {
      const m = sqsEventSourceOf(deployed, functionId);
      return {
        batchSize: env.SQS_BATCH_SIZE ?? m.batchSize,
        batchWindowMs: env.SQS_BATCH_WINDOW_MS ?? m.batchWindowMs,
        concurrency: env.SQS_MAX_CONCURRENCY ?? m.maxConcurrency ?? SQS_UNSCALED_CONCURRENCY,
        functionTimeoutMs: functionEnv.FUNCTION_TIMEOUT_MS,
        reportBatchItemFailures: m.reportBatchItemFailures,
      };
    },
    describe: (env) => `SQS trigger emulation (${env.SQS_RETRY_MODE} mode)`,
    eventSourceName: 'SQS',
    // the deployment's queues: pinned names (no prefix), the stack's region, the SDK's endpoint
    // (AWS's, or AWS_ENDPOINT_URL_SQS), never a queue URL's host
    operator: (stack, env) => {
      const client = new SQSClient({
        region: stack.region,
        useQueueUrlAsEndpoint: false,
        maxAttempts: 2,
      });
      return {
        config: { region: stack.region, mode: env.SQS_RETRY_MODE, client, prefix: '' },
        close: () => client.destroy(),
      };
    },
    unreachable: (stack) => `are they stack ${stack}'s? (sqs:GetQueueUrl on them)`,
    startEventSource: startSqsEventSource,
  },
};
