import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import {
  CreateQueueCommand,
  type DeleteMessageBatchCommandInput,
  type DeleteMessageBatchCommandOutput,
  GetQueueAttributesCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { createClient } from '@redis/client';
import type { Context, SQSEvent, SQSRecord } from 'aws-lambda';
import { type SqsHandler, SqsTrigger } from '../devkit/triggers/sqsTrigger.js';
import type { JournalStep } from '../shared/consumer/journal.js';
import { createSqsClient } from '../shared/transport/sqs/index.js';
import { eventIdOf, journalStep } from './effect.js';
import type { PeerConsumer, PeerContext, PeerInput, RunningPeer } from './types.js';

/**
 * Creates `${namespace}orders` and its dead-letter queue `${namespace}orders-dlq`, moved there by
 * SQS itself after `maxReceiveCount` receives (the RedrivePolicy both SQS peers rely on).
 */
export async function createQueueWithRedrive(
  client: SQSClient,
  namespace: string,
  options: { maxReceiveCount: number; visibilityTimeoutSeconds?: number },
): Promise<{ input: Extract<PeerInput, { kind: 'sqs' }>; queueArn: string }> {
  const arnOf = async (url: string) => {
    const { Attributes } = await client.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }),
    );
    return Attributes?.QueueArn as string;
  };
  const dlq = await client.send(new CreateQueueCommand({ QueueName: `${namespace}orders-dlq` }));
  const deadLetterQueueUrl = dlq.QueueUrl as string;
  const main = await client.send(
    new CreateQueueCommand({
      QueueName: `${namespace}orders`,
      Attributes: {
        RedrivePolicy: JSON.stringify({
          deadLetterTargetArn: await arnOf(deadLetterQueueUrl),
          maxReceiveCount: options.maxReceiveCount,
        }),
        ...(options.visibilityTimeoutSeconds !== undefined
          ? { VisibilityTimeout: String(options.visibilityTimeoutSeconds) }
          : {}),
      },
    }),
  );
  const queueUrl = main.QueueUrl as string;
  return { input: { kind: 'sqs', queueUrl, deadLetterQueueUrl }, queueArn: await arnOf(queueUrl) };
}

export interface PowertoolsPeerOptions {
  /** The function's timeout (default 10 s). */
  functionTimeoutMs?: number;
  /** The queue's visibility timeout (default 60 s: AWS asks for at least 6 × the function timeout). */
  visibilityTimeoutSeconds?: number;
}

/**
 * Powertools for AWS Lambda (TypeScript) behind our local emulation of Lambda's SQS event source
 * mapping: a BatchProcessor reports the failed records, and each record goes through
 * `makeIdempotent` with the Redis (cache) persistence layer, keyed by the envelope's id.
 */
export function powertoolsPeerWith(options: PowertoolsPeerOptions = {}): PeerConsumer {
  const functionTimeoutMs = options.functionTimeoutMs ?? 10_000;
  const visibilityTimeoutSeconds = options.visibilityTimeoutSeconds ?? 60;
  return {
    id: 'peer-powertools',
    transport: 'sqs',
    packages: [
      '@aws-lambda-powertools/batch',
      '@aws-lambda-powertools/idempotency',
      '@redis/client',
      '@aws-sdk/client-sqs',
    ],
    setup:
      'Powertools for AWS Lambda (TypeScript) docs, Batch Processing → "Processing messages from SQS" ' +
      '(BatchProcessor(EventType.SQS) + processPartialResponse, ReportBatchItemFailures on the mapping) ' +
      'and Idempotency → "Batch integration" (makeIdempotent on the record handler, ' +
      'registerLambdaContext per invocation) with Idempotency → "CachePersistenceLayer" (Redis via ' +
      '@redis/client), the key chosen as "Choosing a payload subset for idempotency" advises ' +
      '(eventKeyJmesPath powertools_json(body).id, the id the producer set) and a keyPrefix per run. ' +
      `Mapping: batch size and maximum concurrency from the run, function timeout ${functionTimeoutMs / 1000} s, ` +
      `queue visibility ${visibilityTimeoutSeconds} s (Lambda docs: at least 6 × the function timeout), ` +
      'SQS RedrivePolicy to a dead-letter queue.',
    guarantee:
      'At-least-once delivery (SQS and the event source mapping); Powertools idempotency skips a ' +
      'record whose key has a COMPLETED record in Redis within expiresAfterSeconds (1 h). The ' +
      'Redis record is written after, and separately from, the PostgreSQL transaction: a crash or ' +
      'a Redis failure between the two lets the effect be applied again on redelivery.',
    start: (ctx) =>
      startPowertools(
        ctx,
        ctx.functionTimeoutMs ?? functionTimeoutMs,
        ctx.visibilityTimeoutSeconds ?? visibilityTimeoutSeconds,
      ),
  };
}

/** The peer as its docs set it up (10 s function timeout, 60 s visibility). */
export const powertoolsPeer: PeerConsumer = powertoolsPeerWith();

async function startPowertools(
  ctx: PeerContext,
  functionTimeoutMs: number,
  visibilityTimeoutSeconds: number,
): Promise<RunningPeer> {
  if (!ctx.sqs) throw new Error('peer-powertools needs ctx.sqs');
  const queues = await createQueueWithRedrive(ctx.sqs.client, ctx.namespace, {
    maxReceiveCount: ctx.maxDeliveries,
    visibilityTimeoutSeconds,
  });

  // The docs' Redis client: one connected client, shared by the execution environments below.
  const redis = createClient({ url: ctx.redisUrl });
  redis.on('error', () => {}); // reconnects on its own; a failed command fails the record
  await redis.connect();

  const journal = ctx.journal;
  const step = (s: JournalStep, messageId: string, attempt: number) =>
    journalStep(journal, s, messageId, attempt);

  const idOf = (r: SQSRecord) =>
    eventIdOf(r.body, r.messageAttributes?.event_id?.stringValue, r.messageId);

  // Records the trigger is about to delete (by receipt handle), journaled as 'acked' once deleted.
  const toDelete = new Map<string, { messageId: string; attempt: number }>();

  /**
   * One Lambda execution environment: on AWS each runs one invocation at a time, with its own
   * module-level BatchProcessor (it keeps the batch's records and failures on the instance) and
   * IdempotencyConfig (it holds the registered context). The trigger runs invocations side by
   * side in this process, so each gets an environment of its own, as Lambda would.
   */
  const environment = (): SqsHandler => {
    const processor = new BatchProcessor(EventType.SQS);
    const persistenceStore = new CachePersistenceLayer({ client: redis });
    const config = new IdempotencyConfig({ eventKeyJmesPath: 'powertools_json(body).id' });
    const ran = new WeakSet<SQSRecord>();
    const processIdempotently = makeIdempotent(
      async (record: SQSRecord, _context: Context) => {
        ran.add(record);
        await ctx.handle(record.body, {
          messageId: idOf(record),
          attempt: Number(record.attributes.ApproximateReceiveCount),
        });
      },
      { persistenceStore, config, keyPrefix: `${ctx.namespace}reserve-inventory` },
    );
    const recordHandler = async (record: SQSRecord, context: Context) => {
      const attempt = Number(record.attributes.ApproximateReceiveCount);
      step('received', idOf(record), attempt);
      await processIdempotently(record, context);
      // Our function did not run: a COMPLETED record in Redis returned the stored result.
      if (!ran.has(record)) step('duplicate', idOf(record), attempt);
    };
    return async (event: SQSEvent, context: Context) => {
      config.registerLambdaContext(context);
      const response = await processPartialResponse(event, recordHandler, processor, { context });
      if (journal) {
        const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
        for (const r of event.Records) {
          if (failed.has(r.messageId)) continue;
          const attempt = Number(r.attributes.ApproximateReceiveCount);
          toDelete.set(r.receiptHandle, { messageId: idOf(r), attempt });
        }
      }
      return response;
    };
  };
  const idle: SqsHandler[] = [];
  const handler: SqsHandler = async (event, context) => {
    const env = idle.pop() ?? environment();
    try {
      return await env(event, context);
    } finally {
      idle.push(env);
    }
  };

  // The trigger's own client: long polls of 20 s need a longer request timeout than 20 s.
  const client = createSqsClient({ ...ctx.sqs, requestTimeoutMs: 25_000 });
  if (journal) {
    // 'acked' when SQS confirms the trigger's DeleteMessageBatch for a record.
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const result = await next(args);
        if (context.commandName === 'DeleteMessageBatchCommand') {
          const input = args.input as DeleteMessageBatchCommandInput;
          const output = result.output as DeleteMessageBatchCommandOutput;
          for (const ok of output.Successful ?? []) {
            const handle = input.Entries?.find((e) => e.Id === ok.Id)?.ReceiptHandle ?? '';
            const m = toDelete.get(handle);
            if (!m) continue;
            toDelete.delete(handle);
            step('acked', m.messageId, m.attempt);
          }
        }
        return result;
      },
      { step: 'initialize', name: 'peerJournalAcked' },
    );
  }

  const trigger = new SqsTrigger(
    { client, handler },
    {
      queueUrl: queues.input.queueUrl,
      queueArn: queues.queueArn,
      region: ctx.sqs.region,
      batchSize: ctx.batchSize,
      // AWS: a batch size above 10 needs a batching window
      batchWindowMs: ctx.batchSize > 10 ? 1_000 : 0,
      maxConcurrency: ctx.concurrency,
      functionTimeoutMs,
      reportBatchItemFailures: true,
      functionName: `${ctx.namespace}reserve-inventory`,
    },
  );
  try {
    await trigger.start(); // refuses a visibility timeout under 6 × the function timeout
  } catch (err) {
    client.destroy();
    await redis.close();
    throw err;
  }
  return {
    input: queues.input,
    async stop() {
      await trigger.stop(); // invocations in flight finish and their records are deleted
      client.destroy();
      await redis.close();
    },
  };
}
