import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ListMessageMoveTasksCommand,
  type ListMessageMoveTasksResultEntry,
  type Message,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
  StartMessageMoveTaskCommand,
} from '@aws-sdk/client-sqs';
import { matches, overRedriveLimit, pacer } from '../../consumer/parking.js';
import { peekEnvelope } from '../../consumer/peek.js';
import type {
  MoveTaskReport,
  ParkedEntry,
  ParkingLot,
  ParkReason,
  RedriveOptions,
  RedriveResult,
  RedriveSelection,
} from '../../port/types.js';
import { sleep } from '../../util/async.js';
import { SQS_ATTRIBUTES, SQS_DIAGNOSIS } from './constants.js';
import {
  decodePackedDiagnosis,
  decodeParkedError,
  decodeRedrive,
  encodeRedrive,
} from './redrive.js';
import { identityAttributes } from './SqsPublisher.js';

const attr = (m: Message, name: string) => m.MessageAttributes?.[name]?.StringValue;

/**
 * A parked SQS message and its diagnosis: the packed `diagnosis` attribute, or the older layout
 * (one attribute per field; trace id and producer then from the body), or, for a message the
 * queue's RedrivePolicy moved here, what SQS tells (`sourceQueue`: the queue it came from).
 */
export function parkedFromSqs(m: Message, sourceQueue: string | null = null): ParkedEntry {
  const sent = Number(m.Attributes?.SentTimestamp ?? Date.now());
  const sentAt = new Date(sent).toISOString();
  const body = peekEnvelope(m.Body ?? '');
  const redrive = decodeRedrive(attr(m, SQS_ATTRIBUTES.redrive));
  const common = {
    messageId: attr(m, SQS_ATTRIBUTES.eventId) ?? null,
    type: attr(m, SQS_ATTRIBUTES.eventType) ?? body.type ?? null,
    schemaVersion: attr(m, SQS_ATTRIBUTES.schemaVersion) ?? body.schemaVersion ?? null,
    correlationId: attr(m, SQS_ATTRIBUTES.correlationId) ?? body.correlationId ?? null,
    traceId: body.traceId ?? null,
    producer: body.producer ?? null,
    ...(redrive ? { redriveCount: redrive.count, lastRedriveAt: redrive.lastAt } : {}),
  };
  const packed = decodePackedDiagnosis(attr(m, SQS_DIAGNOSIS.packed));
  const bodyBytes = Buffer.from(m.Body ?? '', 'utf8');
  if (packed) {
    return {
      via: 'consumer',
      body: bodyBytes,
      diagnosis: {
        ...common,
        attempts: packed.attempts,
        firstFailureAt: packed.firstFailureAt,
        parkedAt: packed.parkedAt,
        reason: packed.reason as ParkReason,
        errorClass: packed.errorClass,
        error: packed.error,
        consumer: packed.consumer,
        traceId: packed.traceId ?? common.traceId,
        producer: packed.producer ?? common.producer,
        origin: packed.origin,
      },
    };
  }
  const attempts = Number(attr(m, SQS_ATTRIBUTES.attempt) ?? 0);
  const origin = { queue: sourceQueue, exchange: null, routingKey: null };
  const reason = attr(m, SQS_DIAGNOSIS.parkReason);
  if (reason) {
    // the older layout: one attribute per field, parked at its SentTimestamp
    return {
      via: 'consumer',
      body: bodyBytes,
      diagnosis: {
        ...common,
        attempts,
        parkedAt: sentAt,
        firstFailureAt: attr(m, SQS_ATTRIBUTES.firstFailureAt) ?? sentAt,
        reason: reason as ParkReason,
        ...decodeParkedError(attr(m, SQS_DIAGNOSIS.error), attr(m, SQS_DIAGNOSIS.errorClass)),
        consumer: attr(m, SQS_DIAGNOSIS.consumer) ?? 'unknown',
        origin,
      },
    };
  }
  // Moved here by the queue's RedrivePolicy (maxReceiveCount): SQS's own safety net.
  return {
    via: 'broker',
    body: bodyBytes,
    diagnosis: {
      ...common,
      attempts,
      parkedAt: sentAt,
      firstFailureAt: attr(m, SQS_ATTRIBUTES.firstFailureAt) ?? sentAt,
      reason: 'exhausted',
      errorClass: 'sqs:maxReceiveCount',
      error: 'moved by the queue redrive policy (received more than maxReceiveCount times)',
      consumer: 'sqs',
      origin,
    },
  };
}

const MOVE_TASK_DONE = new Set(['COMPLETED', 'FAILED', 'CANCELLED']);

/**
 * Waits until the move task `handle` of `sourceArn` ended (COMPLETED, FAILED or CANCELLED), polling
 * `ListMessageMoveTasks` every second, at most `options.timeoutMs` (then it reports `RUNNING`: the
 * task goes on without us). SQS lists the most recent tasks first and names a task's handle only
 * while it runs, and a queue has at most one running task: a finished task is the most recent one.
 */
export async function untilMoveTaskEnds(
  client: SQSClient,
  sourceArn: string,
  handle: string,
  options: { timeoutMs?: number; pollMs?: number } = {},
): Promise<MoveTaskReport> {
  const deadline = Date.now() + (options.timeoutMs ?? 15 * 60_000);
  const report = (t: ListMessageMoveTasksResultEntry | undefined, status: string) => ({
    handle,
    status: status as MoveTaskReport['status'],
    moved: Number(t?.ApproximateNumberOfMessagesMoved ?? 0),
    ...(t?.ApproximateNumberOfMessagesToMove !== undefined
      ? { toMove: Number(t.ApproximateNumberOfMessagesToMove) }
      : {}),
    ...(t?.FailureReason ? { failureReason: t.FailureReason } : {}),
  });
  let last: ListMessageMoveTasksResultEntry | undefined;
  for (;;) {
    const { Results = [] } = await client.send(
      new ListMessageMoveTasksCommand({ SourceArn: sourceArn, MaxResults: 10 }),
    );
    const ours = Results.find((t) => t.TaskHandle === handle);
    const latest = ours ?? (Results[0]?.TaskHandle ? undefined : Results[0]);
    if (latest) last = latest;
    if (latest?.Status && MOVE_TASK_DONE.has(latest.Status)) return report(latest, latest.Status);
    if (Date.now() >= deadline) return report(last, 'RUNNING');
    await sleep(Math.min(options.pollMs ?? 1_000, Math.max(0, deadline - Date.now())));
  }
}

/**
 * The SQS parking lot. Reading receives messages and makes them visible again at once. Redrive:
 * `StartMessageMoveTask` when everything is selected and the endpoint supports it (AWS), and the
 * result only once the task ended (`task`: its status, counts and failure reason), otherwise
 * receive → send to the source queue (same event id, attempt reset) → delete, at most `rate` per
 * second; non-selected messages are made visible again.
 *
 * The redrive limit: a matched message already redriven `redriveLimit` times stays parked and is
 * reported in `skipped` (unless `beyondLimit`). A move task cannot filter, so before starting one
 * the parking lot is scanned: if any message is at the limit, no task is started and the others
 * are moved one by one instead. Gap: a message parked at the limit between that scan and the task
 * is moved by the task (its redrive is still counted on arrival).
 */
export function sqsParkingLot(deps: {
  client: SQSClient;
  sourceUrl: string;
  parkingUrl: string;
  parkingArn?: string;
  /** Redrives per message allowed (`REDRIVE_LIMIT`). */
  redriveLimit: number;
}): ParkingLot {
  const { client, parkingUrl, sourceUrl } = deps;
  const sourceQueue = sourceUrl.split('/').at(-1) ?? null;
  const parked = (m: Message) => parkedFromSqs(m, sourceQueue);

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
      return messages.map(parked);
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
      const atLimit = (m: Message) =>
        overRedriveLimit(parked(m), deps.redriveLimit, options) !== undefined;
      let messages: Message[] | undefined;
      if (everything && !options.dryRun && deps.parkingArn) {
        if (!options.beyondLimit) {
          // a move task would move the ones at the limit too: look first
          messages = await scan(Math.max(1, await depth()));
          if (!messages.some(atLimit)) {
            await release(messages);
            messages = undefined;
          }
        }
        let handle: string | undefined;
        if (!messages) {
          try {
            const started = await client.send(
              new StartMessageMoveTaskCommand({
                SourceArn: deps.parkingArn,
                ...(options.rate
                  ? { MaxNumberOfMessagesPerSecond: Math.min(500, Math.ceil(options.rate)) }
                  : {}),
              }),
            );
            handle = started.TaskHandle ?? '';
          } catch {
            // not supported by this endpoint (neither emulator has it): move them one by one
          }
        }
        if (handle !== undefined) {
          const task = await untilMoveTaskEnds(client, deps.parkingArn, handle, options);
          return {
            scanned: 0,
            matched: task.toMove ?? task.moved,
            moved: [],
            dryRun: false,
            skipped: [],
            task,
          };
        }
      }
      messages ??= await scan(Math.max(1, await depth()));
      const result: RedriveResult = {
        scanned: messages.length,
        matched: 0,
        moved: [],
        dryRun: options.dryRun ?? false,
        skipped: [],
      };
      const untouched: Message[] = [];
      const pace = pacer(options.rate);
      for (const m of messages) {
        const entry = parked(m);
        if (!matches(entry, selection)) {
          untouched.push(m);
          continue;
        }
        result.matched++;
        const skip = overRedriveLimit(entry, deps.redriveLimit, options);
        if (skip || options.dryRun) {
          if (skip) result.skipped.push(skip); // stays parked, its diagnosis untouched
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
              // a fresh retry window, counted (the diagnosis stays behind)
              [SQS_ATTRIBUTES.redrive]: encodeRedrive({
                count: (decodeRedrive(attr(m, SQS_ATTRIBUTES.redrive))?.count ?? 0) + 1,
                lastAt: new Date().toISOString(),
              }),
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
        const id = entry.diagnosis.messageId ?? '(no id)';
        result.moved.push(id);
        options.onMoved?.(id);
      }
      await release(untouched);
      return result;
    },
  };
}
