import {
  DeleteMessageBatchCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { inject } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { DEFAULT_RETENTION, type RetryBudget } from '../../shared/index.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import type { SqsBackend } from '../../shared/transport/sqs/index.js';
import { type SqsPipelineQueues, sqsBackend } from '../../shared/transport/sqs/SqsBackend.js';
import type { SqsServer } from '../globalSetup.js';
import { uniqueName } from './services.js';

/** The SQS servers of this run (fauxqs always; moto when on PATH), for `describe.each`. */
export const SQS_SERVERS: SqsServer[] = inject('services').sqs;

/**
 * What a server can do, where the emulators differ (capability flags, as in Watermill's suite).
 * `quickBulkSends`: takes 200 SendMessageBatch calls from four relays at once within seconds, and
 * hands hundreds of messages back as quickly (moto 5 answers some sends after more than 2 s, so
 * the relays' sends time out, and reading 200 messages took over 15 s on a busy machine).
 */
export const SQS_FEATURES = {
  fauxqs: { rejectsInvalidCharacters: true, fifoGroupOrder: true, quickBulkSends: true },
  moto: { rejectsInvalidCharacters: false, fifoGroupOrder: false, quickBulkSends: false },
  localstack: { rejectsInvalidCharacters: true, fifoGroupOrder: true, quickBulkSends: true },
  external: { rejectsInvalidCharacters: true, fifoGroupOrder: true, quickBulkSends: true },
} as const;

export interface SqsRig {
  /** The SQS backend on these queues (prepared). */
  backend: SqsBackend;
  client: SQSClient;
  prefix: string;
  queues: SqsPipelineQueues;
  endpoint: string;
  fifo: boolean;
  close(): Promise<void>;
}

/** Queues of their own (by prefix) on a shared server, created by the SQS backend's `prepare`. */
export async function createSqsRig(
  server: SqsServer,
  label: string,
  options: {
    fifo?: boolean;
    budget?: RetryBudget;
    /** Reach the server here instead (e.g. through a proxy). */
    endpoint?: string;
    visibilityTimeoutSeconds?: number;
    requestTimeoutMs?: number;
  } = {},
): Promise<SqsRig> {
  const endpoint = options.endpoint ?? server.endpoint;
  const prefix = `${uniqueName(label).replace(/_/g, '-')}-`;
  const fifo = options.fifo ?? false;
  const backend = sqsBackend({
    endpoint,
    region: 'us-east-1',
    prefix,
    fifo,
    mode: 'visibility',
    budget: options.budget ?? TEST_RETRY_BUDGET,
    retention: DEFAULT_RETENTION,
    topology: PIPELINE_TOPOLOGY,
    consumer: 'fixture@test',
    requestTimeoutMs: options.requestTimeoutMs ?? 2_000,
    maxAttempts: 1,
    ...(options.visibilityTimeoutSeconds
      ? { visibilityTimeoutSeconds: options.visibilityTimeoutSeconds }
      : {}),
  });
  await backend.prepare();
  return {
    backend,
    client: backend.client,
    prefix,
    queues: await backend.queues(),
    endpoint,
    fifo,
    close: () => backend.close(),
  };
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
