import {
  ChangeMessageVisibilityCommand,
  type MessageAttributeValue,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import type { RetryBudget } from '../../config/budget.js';
import type { Diagnosis, InboundMessage, Outcome } from '../../consumer/types.js';
import { identityAttributes, SQS_ATTRIBUTES } from './SqsPublisher.js';

/** How "retry later" is done on SQS (DESIGN §3). */
export type SqsRetryMode = 'visibility' | 'resend';

/** Diagnosis attributes on parked SQS messages (SQS allows at most 10 attributes per message). */
export const SQS_DIAGNOSIS = {
  parkReason: 'park_reason',
  errorClass: 'error_class',
  error: 'error',
  /** The consumer and its version. When it was parked is the parking message's SentTimestamp. */
  consumer: 'consumer',
} as const;

/** SQS caps a message's total invisibility at 12 hours from its first receive. */
const VISIBILITY_CAP_SECONDS = 12 * 3600;
/** SQS caps a message delay at 15 minutes. */
const MAX_DELAY_SECONDS = 900;

const str = (value: string): MessageAttributeValue => ({ DataType: 'String', StringValue: value });

function attr(record: SQSRecord, name: string): string | undefined {
  return record.messageAttributes?.[name]?.stringValue ?? undefined;
}

export interface SqsSettlerOptions {
  sourceUrl: string;
  parkingUrl: string;
  mode: SqsRetryMode;
  budget: RetryBudget;
  consumer: string;
  fifo?: boolean;
}

/** What happened to a record: `ack` = let it be deleted; `fail` = report it in batchItemFailures. */
export type SqsSettlement = 'ack' | 'fail';

/**
 * Settles outcomes on SQS behind a Lambda SQS trigger with ReportBatchItemFailures:
 * - ack: not reported, so the trigger deletes it;
 * - retry, mode `visibility`: ChangeMessageVisibility to the ladder delay (kept inside the 12 h
 *   cap) and reported as failed: SQS delivers it again after the delay, `ApproximateReceiveCount`
 *   counts the attempts;
 * - retry, mode `resend`: a copy with `DelaySeconds` (≤ 900) and `retry_attempt` + 1, same event
 *   id, then the original succeeds (is deleted). Not for FIFO queues (no per-message delay);
 * - park: a copy with the diagnosis as attributes to the parking queue, then the original
 *   succeeds; if that send fails the original is reported failed and comes back later.
 * The queue's RedrivePolicy (maxReceiveCount above the budget) stays as the safety net.
 */
export class SqsSettler {
  constructor(
    private readonly deps: { client: SQSClient },
    readonly options: SqsSettlerOptions,
  ) {
    if (options.fifo && options.mode === 'resend') {
      throw new Error(
        'retry mode "resend" needs per-message DelaySeconds, which FIFO queues do not allow: use "visibility"',
      );
    }
  }

  /** Turns a trigger record into the use case's input. */
  inbound(record: SQSRecord): InboundMessage {
    const receives = Number(record.attributes.ApproximateReceiveCount ?? '1');
    const attempt =
      this.options.mode === 'visibility'
        ? Math.max(0, receives - 1)
        : Number(attr(record, SQS_ATTRIBUTES.attempt) ?? 0);
    return {
      messageId: attr(record, SQS_ATTRIBUTES.eventId),
      body: Buffer.from(record.body, 'utf8'),
      attempt: Number.isInteger(attempt) && attempt >= 0 ? attempt : 0,
      redelivered: receives > 1,
      firstFailureAt: attr(record, SQS_ATTRIBUTES.firstFailureAt),
      type: attr(record, SQS_ATTRIBUTES.eventType),
      correlationId: attr(record, SQS_ATTRIBUTES.correlationId),
    };
  }

  async settle(
    record: SQSRecord,
    message: InboundMessage,
    outcome: Outcome,
    now = new Date(),
  ): Promise<SqsSettlement> {
    if (outcome.kind === 'ack') return 'ack';
    if (outcome.kind === 'retry') {
      const delaySeconds = Math.ceil(outcome.delayMs / 1000);
      if (this.options.mode === 'visibility') {
        const firstReceive = Number(
          record.attributes.ApproximateFirstReceiveTimestamp ?? now.getTime(),
        );
        const left = VISIBILITY_CAP_SECONDS - Math.ceil((now.getTime() - firstReceive) / 1000) - 60;
        await this.deps.client.send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: this.options.sourceUrl,
            ReceiptHandle: record.receiptHandle,
            VisibilityTimeout: Math.max(0, Math.min(delaySeconds, left)),
          }),
        );
        return 'fail';
      }
      await this.deps.client.send(
        new SendMessageCommand({
          QueueUrl: this.options.sourceUrl,
          MessageBody: record.body,
          DelaySeconds: Math.min(MAX_DELAY_SECONDS, delaySeconds),
          MessageAttributes: {
            ...identityAttributes((name) => attr(record, name)),
            [SQS_ATTRIBUTES.attempt]: str(String(outcome.attempt)),
            [SQS_ATTRIBUTES.firstFailureAt]: str(message.firstFailureAt ?? now.toISOString()),
          },
        }),
      );
      return 'ack';
    }
    try {
      const d = this.diagnosis(record, message, outcome, now);
      await this.deps.client.send(
        new SendMessageCommand({
          QueueUrl: this.options.parkingUrl,
          MessageBody: record.body,
          MessageAttributes: {
            ...identityAttributes((name) => attr(record, name)),
            [SQS_ATTRIBUTES.attempt]: str(String(d.attempts)),
            [SQS_ATTRIBUTES.firstFailureAt]: str(d.firstFailureAt),
            [SQS_DIAGNOSIS.parkReason]: str(d.reason),
            [SQS_DIAGNOSIS.errorClass]: str(d.errorClass),
            [SQS_DIAGNOSIS.error]: str(d.error || '-'),
            [SQS_DIAGNOSIS.consumer]: str(d.consumer),
          },
          ...(this.options.fifo
            ? {
                MessageGroupId: record.attributes.MessageGroupId ?? 'parked',
                MessageDeduplicationId: record.messageId,
              }
            : {}),
        }),
      );
      return 'ack';
    } catch {
      return 'fail'; // parking refused it: it comes back after its visibility timeout; nothing lost
    }
  }

  diagnosis(
    record: SQSRecord,
    message: InboundMessage,
    outcome: Extract<Outcome, { kind: 'park' }>,
    now = new Date(),
  ): Diagnosis {
    return {
      messageId: message.messageId ?? null,
      type: message.type ?? null,
      schemaVersion: attr(record, SQS_ATTRIBUTES.schemaVersion) ?? null,
      attempts: message.attempt,
      firstFailureAt: message.firstFailureAt ?? now.toISOString(),
      parkedAt: now.toISOString(),
      reason: outcome.reason,
      errorClass: outcome.errorClass,
      error: outcome.error.slice(0, 256),
      correlationId: message.correlationId ?? null,
      consumer: this.options.consumer,
    };
  }
}
