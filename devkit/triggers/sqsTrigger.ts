import {
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { visibilityTimeoutRule } from '../../shared/config/rules.js';
import type { Logger } from '../../shared/logger.js';
import { createSqsClient, toSqsRecord } from '../../shared/transport/sqs/index.js';
import { backoffDelay, sleep } from '../../shared/util/async.js';
import { localLambdaContext } from './lambdaContext.js';

export type SqsHandler = (
  event: SQSEvent,
  context: Context,
) => Promise<SQSBatchResponse | undefined>;

export interface SqsTriggerOptions {
  queueUrl: string;
  queueArn: string;
  region?: string;
  /** Records per invocation (AWS default 10; above 10 needs a batching window). */
  batchSize?: number;
  /** How long to gather a batch (ms; AWS default 0). */
  batchWindowMs?: number;
  /** Invocations at once (the mapping's maximum concurrency). Default 2. */
  maxConcurrency?: number;
  /** The function's timeout: the queue's visibility timeout must be at least 6 times it. */
  functionTimeoutMs?: number;
  /**
   * `FunctionResponseTypes: [ReportBatchItemFailures]` on the mapping (default true). Without it
   * the response is ignored: a returned invocation deletes the whole batch.
   */
  reportBatchItemFailures?: boolean;
  /** The function's name in the invocation's context. */
  functionName: string;
}

export class SqsTriggerConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SqsTriggerConfigError';
  }
}

/**
 * Long polls wait up to 20 s: give the trigger a client whose request timeout is longer
 * (`createSqsClient({ requestTimeoutMs: 25_000 })`, as `startSqsTrigger` does).
 *
 * Local emulation of Lambda's SQS event source mapping (docs/aws-facts.md, "Lambda event source mapping for SQS"): long-polls the queue,
 * gathers up to `batchSize` records within the batching window, invokes the handler with the exact
 * event shape (string attributes, `messageAttributes`, `eventSourceARN`…), deletes the records not
 * reported in `batchItemFailures`, leaves the reported ones to their visibility timeout, keeps the
 * whole batch when the handler throws, and runs at most `maxConcurrency` invocations at once.
 */
export class SqsTrigger {
  private stopping = false;
  private readonly abort = new AbortController();
  private loops: Promise<void>[] = [];
  /** Invocations made (batches), their messages and the largest; failed invocations (the batch stayed). */
  readonly stats = { batches: 0, messages: 0, largestBatch: 0, givenBack: 0 };

  constructor(
    private readonly deps: { client: SQSClient; handler: SqsHandler; logger?: Logger | undefined },
    private readonly options: SqsTriggerOptions,
  ) {
    const size = options.batchSize ?? 10;
    if (size < 1 || size > 10_000)
      throw new SqsTriggerConfigError(`batchSize must be 1–10000, got ${size}`);
    if (size > 10 && (options.batchWindowMs ?? 0) < 1_000) {
      throw new SqsTriggerConfigError(
        'a batchSize above 10 needs a batching window of at least 1 s (as on AWS)',
      );
    }
  }

  /** Checks the queue's visibility timeout against the function timeout, then starts polling. */
  async start(): Promise<void> {
    const timeoutMs = this.options.functionTimeoutMs ?? 30_000;
    const { Attributes } = await this.deps.client.send(
      new GetQueueAttributesCommand({
        QueueUrl: this.options.queueUrl,
        AttributeNames: ['VisibilityTimeout'],
      }),
    );
    const visibility = Number(Attributes?.VisibilityTimeout ?? 30);
    validateVisibility(visibility, timeoutMs);
    this.stopping = false;
    this.loops = Array.from({ length: this.options.maxConcurrency ?? 2 }, () => this.poll());
  }

  private async receive(): Promise<Message[]> {
    const size = this.options.batchSize ?? 10;
    const windowMs = this.options.batchWindowMs ?? 0;
    const deadline = Date.now() + windowMs;
    const got: Message[] = [];
    do {
      const waitSeconds =
        got.length === 0
          ? 20
          : Math.max(0, Math.min(20, Math.floor((deadline - Date.now()) / 1000)));
      const out = await this.deps.client.send(
        new ReceiveMessageCommand({
          QueueUrl: this.options.queueUrl,
          MaxNumberOfMessages: Math.min(10, size - got.length),
          WaitTimeSeconds: waitSeconds,
          MessageAttributeNames: ['All'],
          MessageSystemAttributeNames: ['All'],
        }),
        { abortSignal: this.abort.signal },
      );
      got.push(...(out.Messages ?? []));
    } while (got.length > 0 && got.length < size && Date.now() < deadline && !this.stopping);
    return got;
  }

  private async poll(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      let messages: Message[];
      try {
        messages = await this.receive();
      } catch (err) {
        if (this.stopping) return;
        failures++;
        this.deps.logger?.warn('sqs trigger: receive failed', { error: (err as Error).message });
        await sleep(backoffDelay(failures, 200, 5_000));
        continue;
      }
      failures = 0;
      if (messages.length === 0) continue;
      await this.invoke(messages);
    }
  }

  private async invoke(messages: Message[]): Promise<void> {
    const event: SQSEvent = {
      Records: messages.map((m) => toSqsRecord(m, this.options.queueArn, this.options.region)),
    };
    this.stats.batches++;
    this.stats.messages += messages.length;
    this.stats.largestBatch = Math.max(this.stats.largestBatch, messages.length);
    let failed: Set<string>;
    try {
      const result = await this.deps.handler(
        event,
        localLambdaContext(this.options.functionName, this.options.functionTimeoutMs),
      );
      failed =
        this.options.reportBatchItemFailures === false
          ? new Set()
          : new Set((result?.batchItemFailures ?? []).map((f) => f.itemIdentifier));
    } catch (err) {
      // The whole batch stays: every record becomes visible again after its visibility timeout.
      this.stats.givenBack++;
      this.deps.logger?.warn('sqs trigger: invocation failed, the batch stays in the queue', {
        size: messages.length,
        error: (err as Error).message,
      });
      return;
    }
    const done = messages.filter((m) => !failed.has(m.MessageId as string));
    for (let i = 0; i < done.length; i += 10) {
      await this.deps.client
        .send(
          new DeleteMessageBatchCommand({
            QueueUrl: this.options.queueUrl,
            Entries: done
              .slice(i, i + 10)
              .map((m, k) => ({ Id: String(k), ReceiptHandle: m.ReceiptHandle })),
          }),
        )
        .catch((err) => {
          // Not deleted: it comes back after its visibility timeout and the inbox absorbs it.
          this.deps.logger?.warn('sqs trigger: delete failed', { error: (err as Error).message });
        });
    }
  }

  /** Stops polling; invocations in flight finish (and their records are deleted) first. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.abort.abort();
    await Promise.all(this.loops);
  }
}

/**
 * An `SqsTrigger` on a client of its own, whose requests time out after 25 s (long polls wait up
 * to 20 s), started unless `enabled` is false; the client is destroyed when it stops (or fails to
 * start).
 */
export async function startSqsTrigger(
  sqs: { endpoint: string | undefined; region: string },
  deps: { handler: SqsHandler; logger?: Logger | undefined },
  options: SqsTriggerOptions,
  enabled = true,
): Promise<{ readonly stats: SqsTrigger['stats']; stop(): Promise<void> }> {
  const client = createSqsClient({ ...sqs, requestTimeoutMs: 25_000, maxAttempts: 1 });
  const trigger = new SqsTrigger({ client, handler: deps.handler, logger: deps.logger }, options);
  try {
    if (enabled) await trigger.start();
  } catch (err) {
    client.destroy();
    throw err;
  }
  return {
    stats: trigger.stats,
    async stop() {
      await trigger.stop();
      client.destroy();
    },
  };
}

/**
 * AWS's rule for SQS event sources, checked on the queue's actual attribute: the same rule
 * (`visibilityTimeoutRule`) that the configuration applies to `SQS_VISIBILITY_TIMEOUT_S`.
 */
export function validateVisibility(
  visibilityTimeoutSeconds: number,
  functionTimeoutMs: number,
): void {
  const problem = visibilityTimeoutRule(visibilityTimeoutSeconds, functionTimeoutMs);
  if (problem) {
    throw new SqsTriggerConfigError(
      `the queue's visibility timeout (${visibilityTimeoutSeconds} s) ${problem}`,
    );
  }
}
