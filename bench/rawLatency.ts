import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import amqp from 'amqplib';
import { quantile, round1 } from './load.js';
import { receiveAndDelete } from './sqs.js';

/**
 * Raw broker latency at a fixed rate, no database: how long a single persistent message takes to be
 * confirmed (the floor of the outbox lag) and to reach a consumer (the floor of the end-to-end
 * latency). Messages are ~300 bytes, like an envelope.
 */
export interface RawLatency {
  messages: number;
  confirmMs: { p50: number; p99: number };
  deliverMs: { p50: number; p99: number };
}

const PAD = 'x'.repeat(240);

function summary(values: number[]): { p50: number; p99: number } {
  values.sort((a, b) => a - b);
  return { p50: round1(quantile(values, 0.5)), p99: round1(quantile(values, 0.99)) };
}

/** Sends `total` messages, one every 1/rate s, calling `send(i)` without waiting for it. */
async function paced(rate: number, total: number, send: (i: number) => void): Promise<void> {
  const started = performance.now();
  let next = 0;
  while (next < total) {
    const due = Math.min(total, Math.floor(((performance.now() - started) * rate) / 1000) + 1);
    for (; next < due; next++) send(next);
    await sleep(Math.max(1, Math.min(5, 1000 / rate)));
  }
}

async function until(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`raw latency: ${what} not done in ${timeoutMs} ms`);
    await sleep(20);
  }
}

/** RabbitMQ: confirm channel, a quorum queue, a consumer with prefetch 16 and manual acks. */
export async function rawRabbitLatency(
  amqpUrl: string,
  rate: number,
  seconds: number,
): Promise<RawLatency> {
  const total = Math.max(1, Math.round(rate * seconds));
  const queue = `bench.raw.${randomUUID()}`;
  const pub = await amqp.connect(amqpUrl);
  const sub = await amqp.connect(amqpUrl);
  try {
    const ch = await pub.createConfirmChannel();
    await ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    const confirm: number[] = [];
    const deliver: number[] = [];
    const subCh = await sub.createChannel();
    await subCh.prefetch(16);
    await subCh.consume(queue, (msg) => {
      if (!msg) return;
      const { sentAt } = JSON.parse(msg.content.toString()) as { sentAt: number };
      deliver.push(performance.now() - sentAt);
      subCh.ack(msg);
    });
    await paced(rate, total, (i) => {
      const sentAt = performance.now();
      ch.sendToQueue(
        queue,
        Buffer.from(JSON.stringify({ i, sentAt, pad: PAD })),
        { persistent: true, messageId: randomUUID(), contentType: 'application/json' },
        (err: unknown) => {
          if (!err) confirm.push(performance.now() - sentAt);
        },
      );
    });
    await until(() => deliver.length >= total && confirm.length >= total, 30_000, 'rabbitmq');
    await subCh.close();
    await ch.deleteQueue(queue);
    return { messages: total, confirmMs: summary(confirm), deliverMs: summary(deliver) };
  } finally {
    await pub.close().catch(() => {});
    await sub.close().catch(() => {});
  }
}

/** SQS: one SendMessage per message (no batching), two long-polling receivers (10 per call). */
export async function rawSqsLatency(
  client: SQSClient,
  queueName: string,
  rate: number,
  seconds: number,
): Promise<RawLatency> {
  const total = Math.max(1, Math.round(rate * seconds));
  const { QueueUrl } = await client.send(new CreateQueueCommand({ QueueName: queueName }));
  const queueUrl = QueueUrl as string;
  const confirm: number[] = [];
  const deliver: number[] = [];
  let failed = 0;
  let stop = false;
  const receivers = Array.from({ length: 2 }, async () => {
    while (!stop) {
      await receiveAndDelete(client, queueUrl, (ms) => {
        const now = performance.now();
        for (const m of ms)
          deliver.push(now - (JSON.parse(m.Body ?? '{}') as { sentAt: number }).sentAt);
      });
    }
  });
  try {
    await paced(rate, total, (i) => {
      const sentAt = performance.now();
      client
        .send(
          new SendMessageCommand({
            QueueUrl: queueUrl,
            MessageBody: JSON.stringify({ i, sentAt, pad: PAD }),
          }),
        )
        .then(
          () => confirm.push(performance.now() - sentAt),
          () => failed++,
        );
    });
    await until(
      () => deliver.length + failed >= total && confirm.length + failed >= total,
      30_000,
      'sqs',
    );
  } finally {
    stop = true;
    await Promise.allSettled(receivers);
    await client.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => {});
  }
  if (failed) throw new Error(`raw SQS latency: ${failed} sends failed`);
  return { messages: total, confirmMs: summary(confirm), deliverMs: summary(deliver) };
}
