import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
  StartMessageMoveTaskCommand,
} from '@aws-sdk/client-sqs';
import { matches, pacer } from '../../consumer/parking.js';
import type {
  ParkedEntry,
  ParkingLot,
  ParkReason,
  RedriveOptions,
  RedriveResult,
  RedriveSelection,
} from '../types.js';
import { SQS_ATTRIBUTES, SQS_DIAGNOSIS } from './constants.js';
import { identityAttributes } from './SqsPublisher.js';

const attr = (m: Message, name: string) => m.MessageAttributes?.[name]?.StringValue;

export function parkedFromSqs(m: Message): ParkedEntry {
  const sent = Number(m.Attributes?.SentTimestamp ?? Date.now());
  const parkedAt = new Date(sent).toISOString();
  const reason = attr(m, SQS_DIAGNOSIS.parkReason);
  const common = {
    messageId: attr(m, SQS_ATTRIBUTES.eventId) ?? null,
    type: attr(m, SQS_ATTRIBUTES.eventType) ?? null,
    schemaVersion: attr(m, SQS_ATTRIBUTES.schemaVersion) ?? null,
    attempts: Number(attr(m, SQS_ATTRIBUTES.attempt) ?? 0),
    parkedAt,
    correlationId: attr(m, SQS_ATTRIBUTES.correlationId) ?? null,
  };
  if (reason) {
    return {
      via: 'consumer',
      diagnosis: {
        ...common,
        firstFailureAt: attr(m, SQS_ATTRIBUTES.firstFailureAt) ?? parkedAt,
        reason: reason as ParkReason,
        errorClass: attr(m, SQS_DIAGNOSIS.errorClass) ?? 'unknown',
        error: attr(m, SQS_DIAGNOSIS.error) ?? '',
        consumer: attr(m, SQS_DIAGNOSIS.consumer) ?? 'unknown',
      },
    };
  }
  // Moved here by the queue's RedrivePolicy (maxReceiveCount): SQS's own safety net.
  return {
    via: 'broker',
    diagnosis: {
      ...common,
      firstFailureAt: parkedAt,
      reason: 'exhausted',
      errorClass: 'sqs:maxReceiveCount',
      error: 'moved by the queue redrive policy (received more than maxReceiveCount times)',
      consumer: 'sqs',
    },
  };
}

/**
 * The SQS parking lot. Reading receives messages and makes them visible again at once. Redrive:
 * `StartMessageMoveTask` when everything is selected and the endpoint supports it (AWS), otherwise
 * receive → send to the source queue (same event id, attempt reset) → delete, at most `rate` per
 * second; non-selected messages are made visible again.
 */
export function sqsParkingLot(deps: {
  client: SQSClient;
  sourceUrl: string;
  parkingUrl: string;
  parkingArn?: string;
}): ParkingLot {
  const { client, parkingUrl, sourceUrl } = deps;

  const depth = async () => {
    const out = await client.send(
      new GetQueueAttributesCommand({
        QueueUrl: parkingUrl,
        AttributeNames: ['ApproximateNumberOfMessages'],
      }),
    );
    return Number(out.Attributes?.ApproximateNumberOfMessages ?? 0);
  };

  /** Receives up to `limit` distinct messages (hidden for 60 s while we look at them). */
  const scan = async (limit: number): Promise<Message[]> => {
    const seen = new Map<string, Message>();
    let empty = 0;
    while (seen.size < limit && empty < 2) {
      const out = await client.send(
        new ReceiveMessageCommand({
          QueueUrl: parkingUrl,
          MaxNumberOfMessages: Math.min(10, limit - seen.size),
          VisibilityTimeout: 60,
          WaitTimeSeconds: 0,
          MessageAttributeNames: ['All'],
          MessageSystemAttributeNames: ['All'],
        }),
      );
      const got = out.Messages ?? [];
      if (got.length === 0) empty++;
      for (const m of got) seen.set(m.MessageId as string, m);
    }
    return [...seen.values()];
  };

  const release = async (messages: Message[]) => {
    for (let i = 0; i < messages.length; i += 10) {
      await client
        .send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: parkingUrl,
            Entries: messages.slice(i, i + 10).map((m, k) => ({
              Id: String(k),
              ReceiptHandle: m.ReceiptHandle,
              VisibilityTimeout: 0,
            })),
          }),
        )
        .catch(() => {}); // they become visible after 60 s anyway
    }
  };

  return {
    async list(limit = 100) {
      const messages = await scan(Math.min(limit, Math.max(1, await depth())));
      await release(messages);
      return messages.map(parkedFromSqs);
    },

    async redrive(
      selection: RedriveSelection,
      options: RedriveOptions = {},
    ): Promise<RedriveResult> {
      const everything =
        !selection.types &&
        !selection.errorClasses &&
        !selection.since &&
        !selection.until &&
        !selection.ids;
      if (everything && !options.dryRun && deps.parkingArn) {
        try {
          await client.send(
            new StartMessageMoveTaskCommand({
              SourceArn: deps.parkingArn,
              ...(options.rate
                ? { MaxNumberOfMessagesPerSecond: Math.min(500, Math.ceil(options.rate)) }
                : {}),
            }),
          );
          return {
            scanned: 0,
            matched: 0,
            moved: ['(all: StartMessageMoveTask started)'],
            dryRun: false,
          };
        } catch {
          // not supported by this endpoint (neither emulator has it): move them one by one
        }
      }
      const messages = await scan(Math.max(1, await depth()));
      const result: RedriveResult = {
        scanned: messages.length,
        matched: 0,
        moved: [],
        dryRun: options.dryRun ?? false,
      };
      const untouched: Message[] = [];
      const pace = pacer(options.rate);
      for (const m of messages) {
        const parked = parkedFromSqs(m);
        if (!matches(parked, selection)) {
          untouched.push(m);
          continue;
        }
        result.matched++;
        if (options.dryRun) {
          untouched.push(m);
          continue;
        }
        await pace();
        const keep = identityAttributes((name) => attr(m, name));
        await client.send(
          new SendMessageCommand({
            QueueUrl: sourceUrl,
            MessageBody: m.Body ?? '',
            MessageAttributes: {
              ...keep,
              [SQS_ATTRIBUTES.attempt]: { DataType: 'String', StringValue: '0' },
            },
            // FIFO: back into its own message group; a fresh deduplication id (a redrive is new)
            ...(sourceUrl.endsWith('.fifo')
              ? {
                  MessageGroupId: m.Attributes?.MessageGroupId ?? 'redrive',
                  MessageDeduplicationId: `${m.MessageId}-redrive-${Date.now()}`,
                }
              : {}),
          }),
        );
        await client.send(
          new DeleteMessageCommand({ QueueUrl: parkingUrl, ReceiptHandle: m.ReceiptHandle }),
        );
        const id = parked.diagnosis.messageId ?? '(no id)';
        result.moved.push(id);
        options.onMoved?.(id);
      }
      await release(untouched);
      return result;
    },
  };
}
