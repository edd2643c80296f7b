import {
  GetQueueAttributesCommand,
  type MessageAttributeValue,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { type Envelope, encodeEnvelope } from '../../envelope/envelope.js';
import { TransportUnavailableError } from '../../port/errors.js';
import type { Publisher, PublishFailureReason, PublishOutcome } from '../../port/types.js';
import { SQS_ATTRIBUTES } from './constants.js';

const str = (value: string): MessageAttributeValue => ({ DataType: 'String', StringValue: value });

/** Attributes carrying the envelope's identity, so consumers and operators need not parse bodies. */
export function envelopeAttributes(e: Envelope): Record<string, MessageAttributeValue> {
  return {
    [SQS_ATTRIBUTES.eventId]: str(e.id),
    [SQS_ATTRIBUTES.eventType]: str(e.type),
    [SQS_ATTRIBUTES.schemaVersion]: str(e.schema_version),
    [SQS_ATTRIBUTES.correlationId]: str(e.correlation_id),
  };
}

/** The envelope-identity attributes of a received message, for a copy of it (retry, park, redrive). */
export function identityAttributes(
  get: (name: string) => string | undefined,
): Record<string, MessageAttributeValue> {
  const out: Record<string, MessageAttributeValue> = {};
  for (const name of [
    SQS_ATTRIBUTES.eventId,
    SQS_ATTRIBUTES.eventType,
    SQS_ATTRIBUTES.schemaVersion,
    SQS_ATTRIBUTES.correlationId,
  ]) {
    const v = get(name);
    if (v !== undefined) out[name] = str(v);
  }
  return out;
}

/** Maps an SDK error of a whole call to a failure reason. */
export function sqsFailureReason(err: unknown): PublishFailureReason {
  const e = err as {
    name?: string;
    code?: string;
    message?: string;
    $metadata?: { httpStatusCode?: number };
  };
  const name = `${e.name ?? ''} ${e.code ?? ''}`;
  // SNS: the topic does not exist (`NotFound`)
  if (/NonExistentQueue|QueueDoesNotExist|NotFound/i.test(name)) return 'unroutable';
  if (/Throttl|RequestLimitExceeded|SlowDown/i.test(name) || e.$metadata?.httpStatusCode === 429)
    return 'throttled';
  // The SDK reports a dropped connection as a TimeoutError "socket hang up": look at the message first.
  if (
    /ECONNREFUSED|ECONNRESET|EPIPE|ENOTFOUND|EHOSTUNREACH|socket hang up|network/i.test(
      `${e.message ?? ''} ${e.code ?? ''}`,
    )
  ) {
    return 'connection';
  }
  if (/Timeout|Abort/i.test(name)) return 'timeout';
  if ((e.$metadata?.httpStatusCode ?? 0) >= 500) return 'connection';
  return 'nacked';
}

export interface SqsPublisherOptions {
  queueUrl: string;
  /** FIFO queue: MessageGroupId = aggregate id (per-order order), MessageDeduplicationId = event id. */
  fifo?: boolean;
  /** SendMessageBatch calls in flight at once. Default 8. */
  concurrency?: number;
}

/** One batch call's answer, by entry id (the envelope's index): accepted, refused. */
export interface BatchAnswer {
  successful: readonly string[];
  failed: readonly { id: string; code?: string | undefined; message?: string | undefined }[];
}

/** What SendMessageBatch and PublishBatch answer (one shape), by entry id. */
export function batchAnswer(out: {
  Successful?: { Id?: string | undefined }[] | undefined;
  Failed?:
    | { Id?: string | undefined; Code?: string | undefined; Message?: string | undefined }[]
    | undefined;
}): BatchAnswer {
  return {
    successful: (out.Successful ?? []).map((s) => s.Id as string),
    failed: (out.Failed ?? []).map((f) => ({
      id: f.Id as string,
      code: f.Code,
      message: f.Message,
    })),
  };
}

/** FIFO (queue or topic): the group is the aggregate (its events in order), deduplication by event id. */
export const fifoIds = (e: Envelope, fifo: boolean | undefined) =>
  fifo ? { MessageGroupId: e.aggregate.id, MessageDeduplicationId: e.id } : {};

/**
 * Sends envelopes in calls of 10 entries (SQS's and SNS's batch limit), several calls in flight.
 * An entry counts only when its call's answer lists it as accepted; a refused entry or a failed
 * call fails only its own messages, which the relay publishes again later.
 */
export async function publishInBatches(
  envelopes: readonly Envelope[],
  concurrency: number,
  send: (entries: readonly { id: string; envelope: Envelope }[]) => Promise<BatchAnswer>,
): Promise<PublishOutcome[]> {
  const outcomes: PublishOutcome[] = new Array(envelopes.length);
  const chunks: number[][] = [];
  for (let i = 0; i < envelopes.length; i += 10) {
    chunks.push(Array.from({ length: Math.min(10, envelopes.length - i) }, (_, k) => i + k));
  }
  const sendChunk = async (chunk: number[]) => {
    try {
      const answer = await send(
        chunk.map((i) => ({ id: String(i), envelope: envelopes[i] as Envelope })),
      );
      for (const id of answer.successful) {
        outcomes[Number(id)] = { id: (envelopes[Number(id)] as Envelope).id, ok: true };
      }
      for (const f of answer.failed) {
        const reason: PublishFailureReason = /Throttl/i.test(f.code ?? '') ? 'throttled' : 'nacked';
        outcomes[Number(f.id)] = {
          id: (envelopes[Number(f.id)] as Envelope).id,
          ok: false,
          reason,
          error: `${f.code}: ${f.message ?? ''}`.trim(),
        };
      }
      for (const i of chunk) {
        // An entry in neither list: its fate is unknown, so it is a failure (published again later).
        outcomes[i] ??= {
          id: (envelopes[i] as Envelope).id,
          ok: false,
          reason: 'timeout',
          error: 'not in the batch response',
        };
      }
    } catch (err) {
      const reason = sqsFailureReason(err);
      for (const i of chunk) {
        outcomes[i] = {
          id: (envelopes[i] as Envelope).id,
          ok: false,
          reason,
          error: `${(err as Error).name}: ${(err as Error).message}`,
        };
      }
    }
  };
  let next = 0;
  const worker = async () => {
    while (next < chunks.length) await sendChunk(chunks[next++] as number[]);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, chunks.length) }, worker));
  return outcomes;
}

/** Publishes envelopes to an SQS queue with SendMessageBatch (`publishInBatches`). */
export class SqsPublisher implements Publisher {
  constructor(
    private readonly deps: { client: SQSClient },
    private readonly options: SqsPublisherOptions,
  ) {}

  async ready(timeoutMs = 2_000): Promise<void> {
    try {
      await this.deps.client.send(
        new GetQueueAttributesCommand({
          QueueUrl: this.options.queueUrl,
          AttributeNames: ['QueueArn'],
        }),
        { abortSignal: AbortSignal.timeout(timeoutMs) },
      );
    } catch (err) {
      throw new TransportUnavailableError(`SQS not reachable: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  publish(envelopes: readonly Envelope[]): Promise<PublishOutcome[]> {
    return publishInBatches(envelopes, this.options.concurrency ?? 8, async (entries) => {
      const out = await this.deps.client.send(
        new SendMessageBatchCommand({
          QueueUrl: this.options.queueUrl,
          Entries: entries.map(({ id, envelope: e }) => ({
            Id: id,
            MessageBody: encodeEnvelope(e).toString('utf8'),
            MessageAttributes: envelopeAttributes(e),
            ...fifoIds(e, this.options.fifo),
          })),
        }),
      );
      return batchAnswer(out);
    });
  }

  async close(): Promise<void> {}
}

/**
 * A publisher built on first use (its queue URL or topic ARN looked up then); a failed lookup
 * fails the publish (the rows stay) and is tried again on the next.
 */
export class LazyPublisher implements Publisher {
  private inner: Promise<Publisher> | undefined;

  constructor(private readonly build: () => Promise<Publisher>) {}

  private get(): Promise<Publisher> {
    this.inner ??= this.build().catch((err: unknown) => {
      this.inner = undefined;
      throw err;
    });
    return this.inner;
  }

  async ready(timeoutMs?: number): Promise<void> {
    let p: Publisher;
    try {
      p = await this.get();
    } catch (err) {
      throw new TransportUnavailableError(`SQS not reachable: ${(err as Error).message}`, {
        cause: err,
      });
    }
    await p.ready(timeoutMs);
  }

  async publish(envelopes: Parameters<Publisher['publish']>[0]) {
    let p: Publisher;
    try {
      p = await this.get();
    } catch (err) {
      const error = `SQS queue not resolved: ${(err as Error).message}`;
      const reason = sqsFailureReason(err);
      return envelopes.map((e) => ({ id: e.id, ok: false as const, reason, error }));
    }
    return p.publish(envelopes);
  }

  async close(): Promise<void> {}
}
