import {
  DeleteMessageBatchCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { inject } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import {
  DEFAULT_RETENTION,
  type RetryBudget,
  TEST_RETRY_BUDGET,
} from '../../shared/config/budget.js';
import { createSqsClient } from '../../shared/transport/sqs/client.js';
import { sqsQueueNames } from '../../shared/transport/sqs/constants.js';
import {
  defaultSqsQueueSettings,
  ensureSqsQueues,
  type SqsQueues,
} from '../../shared/transport/sqs/queues.js';
import type { SqsServer } from '../globalSetup.js';
import { uniqueName } from './services.js';

/** The SQS servers of this run (fauxqs always; moto when on PATH), for `describe.each`. */
export const SQS_SERVERS: SqsServer[] = inject('services').sqs;

/** What a server can do, where the emulators differ (capability flags, as in Watermill's suite). */
export const SQS_FEATURES = {
  fauxqs: { rejectsInvalidCharacters: true, fifoGroupOrder: true },
  moto: { rejectsInvalidCharacters: false, fifoGroupOrder: false },
  localstack: { rejectsInvalidCharacters: true, fifoGroupOrder: true },
  external: { rejectsInvalidCharacters: true, fifoGroupOrder: true },
} as const;

export interface SqsFixture {
  client: SQSClient;
  prefix: string;
  queues: SqsQueues;
  endpoint: string;
  fifo: boolean;
}

/** Queues of their own (by prefix) on a shared server. */
export async function createSqsFixture(
  server: SqsServer,
  label: string,
  options: {
    fifo?: boolean;
    budget?: RetryBudget;
    endpoint?: string;
    visibilityTimeoutSeconds?: number;
  } = {},
): Promise<SqsFixture> {
  const endpoint = options.endpoint ?? server.endpoint;
  const client = createSqsClient({ endpoint, requestTimeoutMs: 2_000, maxAttempts: 1 });
  const prefix = `${uniqueName(label).replace(/_/g, '-')}-`;
  const queues = await ensureSqsQueues(
    client,
    sqsQueueNames(prefix, options.fifo),
    DEFAULT_RETENTION,
    {
      ...defaultSqsQueueSettings(options.budget ?? TEST_RETRY_BUDGET),
      ...(options.visibilityTimeoutSeconds
        ? { visibilityTimeoutSeconds: options.visibilityTimeoutSeconds }
        : {}),
    },
  );
  return { client, prefix, queues, endpoint, fifo: options.fifo ?? false };
}

/** Receives (and deletes) until `done(all)` holds; returns every message received. */
export async function receiveAll(
  client: SQSClient,
  queueUrl: string,
  done: (messages: Message[]) => boolean,
  timeoutMs = 15_000,
): Promise<Message[]> {
  const all: Message[] = [];
  await waitFor(
    async () => {
      const out = await client.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 0,
          MessageAttributeNames: ['All'],
          MessageSystemAttributeNames: ['All'],
        }),
      );
      const got = out.Messages ?? [];
      all.push(...got);
      if (got.length > 0) {
        await client.send(
          new DeleteMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: got.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
          }),
        );
      }
      return done(all);
    },
    { timeoutMs, intervalMs: 20, message: `messages in ${queueUrl} (got ${all.length})` },
  );
  return all;
}
