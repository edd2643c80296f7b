import {
  ChangeMessageVisibilityCommand,
  type MessageAttributeValue,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import type {
  Delivery,
  Diagnosis,
  InboundMessage,
  RetryRequest,
  Settle,
  Settled,
} from '../../port/types.js';
import { SQS_ATTRIBUTES, SQS_DIAGNOSIS, SQS_LIMITS, type SqsRetryMode } from './constants.js';
import { SqsGiveBackError } from './errors.js';
import { encodePackedDiagnosis, receivedRedrive, redriveAttributes } from './redrive.js';
import { identityAttributes } from './SqsPublisher.js';

const str = (value: string): MessageAttributeValue => ({ DataType: 'String', StringValue: value });

function attr(record: SQSRecord, name: string): string | undefined {
  return record.messageAttributes?.[name]?.stringValue ?? undefined;
}

/** The queue name of an SQS queue ARN (`arn:aws:sqs:<region>:<account>:<name>`). */
export function queueOfArn(arn: string | undefined): string | null {
  const name = arn?.split(':').at(-1);
  return name ? name : null;
}

/** A record of the Lambda SQS trigger's event. */
export interface SqsDelivery extends Delivery {
  record: SQSRecord;
}

/**
 * A trigger record as the transport port's inbound message. In `visibility` mode the attempt is
 * the receive count (the same message comes back); in `resend` mode it travels as an attribute.
 */
export function sqsDelivery(record: SQSRecord, mode: SqsRetryMode): SqsDelivery {
  const receives = Number(record.attributes.ApproximateReceiveCount ?? '1');
  // moved back by a move task with its park diagnosis: a fresh window, attempts from 0
  const { redrive, movedBack } = receivedRedrive(
    (name) => attr(record, name),
    record.attributes.SentTimestamp,
  );
  const firstReceive = Number(record.attributes.ApproximateFirstReceiveTimestamp);
  const redrivenAt = redrive ? Date.parse(redrive.lastAt) : Number.NaN;
  // Visibility mode: the same message comes back, with no attribute of ours changed; it first
  // failed when it was first received (that delivery did not delete it). A message moved back by a
  // move task counts only from its redrive on.
  const firstFailureAt =
    mode === 'visibility' &&
    receives > 1 &&
    firstReceive > 0 &&
    (!movedBack || firstReceive >= redrivenAt)
      ? new Date(firstReceive).toISOString()
      : undefined;
  const attempt =
    mode === 'visibility'
      ? Math.max(0, receives - 1)
      : movedBack
        ? 0
        : Number(attr(record, SQS_ATTRIBUTES.attempt) ?? 0);
  const message: InboundMessage = {
    messageId: attr(record, SQS_ATTRIBUTES.eventId),
    body: Buffer.from(record.body, 'utf8'),
    attempt: Number.isInteger(attempt) && attempt >= 0 ? attempt : 0,
    redelivered: receives > 1,
    firstFailureAt:
      (movedBack ? undefined : attr(record, SQS_ATTRIBUTES.firstFailureAt)) ?? firstFailureAt,
    type: attr(record, SQS_ATTRIBUTES.eventType),
    schemaVersion: attr(record, SQS_ATTRIBUTES.schemaVersion),
    correlationId: attr(record, SQS_ATTRIBUTES.correlationId),
    origin: { queue: queueOfArn(record.eventSourceARN), exchange: null, routingKey: null },
    ...(redrive ? { redrive } : {}),
  };
  return { message, record };
}

export interface SqsSettleOptions {
  sourceUrl: string;
  parkingUrl: string;
  mode: SqsRetryMode;
  fifo?: boolean;
  /** The budget's jitter (`RETRY_JITTER`, ±fraction of each step); 0 or unset: none. */
  jitter?: number;
  /** Random source for the jitter (tests). */
  random?: () => number;
}

/**
 * The delay of an SQS retry, in whole seconds (the unit of `DelaySeconds` and of a visibility
 * timeout): the ladder step with the budget's jitter, uniform over the whole seconds within
 * step·(1 − jitter) … step·(1 + jitter), the range RabbitMQ's jitter buckets span. A step whose
 * range holds no whole second but its own rounding (1 s ± 10 %) is not jittered; one whose range
 * holds none at all (1.5 s ± 10 %) is rounded up, as without jitter.
 */
export function sqsRetryDelaySeconds(stepMs: number, jitter = 0, random = Math.random): number {
  const plain = Math.ceil(stepMs / 1000);
  if (jitter <= 0) return plain;
  const lo = Math.ceil((stepMs * (1 - jitter)) / 1000);
  const hi = Math.floor((stepMs * (1 + jitter)) / 1000);
  if (hi <= lo) return hi === lo ? lo : plain;
  return Math.min(hi, lo + Math.floor(random() * (hi - lo + 1)));
}

/**
 * The settle contract behind the Lambda SQS trigger with ReportBatchItemFailures:
 * - ack: nothing to do; a record not reported in `batchItemFailures` is deleted by the trigger;
 * - every retry delay is the ladder step with the budget's jitter, in whole seconds
 *   ({@link sqsRetryDelaySeconds});
 * - retry, mode `visibility`: ChangeMessageVisibility to the ladder delay (inside the 12 h cap),
 *   and the record is reported failed: SQS delivers the same message again after the delay,
 *   `ApproximateReceiveCount` counts the attempts;
 * - retry, mode `resend`: a copy with `DelaySeconds` (≤ 900) and `retry_attempt` + 1, same event
 *   id; then the original succeeds (is deleted). Not for FIFO queues (no per-message delay);
 * - park: a copy with the diagnosis (one JSON attribute) to the parking queue, then the original
 *   succeeds; if that send fails the record is reported failed and comes back later;
 * - give back: throw, so the records are not deleted (a whole invocation, or one record through
 *   Powertools batch, which reports it failed).
 * The queue's RedrivePolicy (maxReceiveCount above the budget) stays as the safety net.
 */
export class SqsSettle implements Settle<SqsDelivery> {
  readonly ackMode = 'message';

  constructor(
    private readonly deps: { client: SQSClient },
    readonly options: SqsSettleOptions,
  ) {
    if (options.fifo && options.mode === 'resend') {
      throw new Error(
        'retry mode "resend" needs per-message DelaySeconds, which FIFO queues do not allow: use "visibility"',
      );
    }
  }

  async ack(): Promise<void> {}

  async retryLater(d: SqsDelivery, retry: RetryRequest, now = new Date()): Promise<Settled> {
    const { record } = d;
    const delaySeconds = sqsRetryDelaySeconds(
      retry.delayMs,
      this.options.jitter,
      this.options.random,
    );
    if (this.options.mode === 'visibility') {
      const firstReceive = Number(
        record.attributes.ApproximateFirstReceiveTimestamp ?? now.getTime(),
      );
      const left =
        SQS_LIMITS.visibilityCapSeconds - Math.ceil((now.getTime() - firstReceive) / 1000) - 60;
      const visibility = Math.max(0, Math.min(delaySeconds, left));
      await this.deps.client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: this.options.sourceUrl,
          ReceiptHandle: record.receiptHandle,
          VisibilityTimeout: visibility,
        }),
      );
      return { state: 'returned', detail: `in ${visibility * 1000} ms, visibility` };
    }
    const delay = Math.min(SQS_LIMITS.maxDelaySeconds, delaySeconds);
    await this.deps.client.send(
      new SendMessageCommand({
        QueueUrl: this.options.sourceUrl,
        MessageBody: record.body,
        DelaySeconds: delay,
        MessageAttributes: {
          ...identityAttributes((name) => attr(record, name)),
          [SQS_ATTRIBUTES.attempt]: str(String(retry.attempt)),
          [SQS_ATTRIBUTES.firstFailureAt]: str(retry.firstFailureAt),
          ...redriveAttributes(d.message.redrive),
        },
      }),
    );
    return { state: 'ack', detail: `in ${delay * 1000} ms, resend` };
  }

  async park(d: SqsDelivery, diagnosis: Diagnosis): Promise<Settled> {
    const { record } = d;
    try {
      await this.deps.client.send(
        new SendMessageCommand({
          QueueUrl: this.options.parkingUrl,
          MessageBody: record.body,
          // identity (4), the packed diagnosis, the redrive stamp: 6 of SQS's 10 attributes
          MessageAttributes: {
            ...identityAttributes((name) => attr(record, name)),
            [SQS_DIAGNOSIS.packed]: encodePackedDiagnosis({
              v: 1,
              reason: diagnosis.reason,
              errorClass: diagnosis.errorClass,
              error: diagnosis.error,
              consumer: diagnosis.consumer,
              attempts: diagnosis.attempts,
              firstFailureAt: diagnosis.firstFailureAt,
              parkedAt: diagnosis.parkedAt,
              traceId: diagnosis.traceId,
              producer: diagnosis.producer,
              origin: diagnosis.origin,
            }),
            ...redriveAttributes(d.message.redrive),
          },
          ...(this.options.fifo
            ? {
                MessageGroupId: record.attributes.MessageGroupId ?? 'parked',
                MessageDeduplicationId: record.messageId,
              }
            : {}),
        }),
      );
      return { state: 'ack' };
    } catch (err) {
      // parking refused it: it comes back after its visibility timeout; nothing lost
      return { state: 'returned', detail: (err as Error).message };
    }
  }

  async giveBack(deliveries: readonly SqsDelivery[], cause: Error): Promise<void> {
    throw new SqsGiveBackError(
      `${deliveries.length} record(s) given back (${cause.message}): they stay in the queue`,
      { cause },
    );
  }
}
