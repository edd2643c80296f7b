import {
  DeleteMessageBatchCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { ensureLocalSqs } from '../devkit/emulators/sqsServer.js';
import type { Env } from '../shared/config/env.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { type Envelope, encodeEnvelope } from '../shared/envelope/envelope.js';
import { setStock } from '../shared/inventory/stock.js';
import { createLogger } from '../shared/logger.js';
import { createSqsClient, envelopeAttributes } from '../shared/transport/sqs/index.js';
import {
  BENCH_BACKEND,
  insertOutbox,
  orderEvents,
  timedDrain,
  timedReserve,
  withBenchEnvironment,
} from './environment.js';
import { progress } from './progress.js';
import { type BenchFigure, figure, median } from './report.js';
import { rawTransactions } from './reserve.js';

export interface SqsBenchOptions {
  messages: number;
  runs: number;
  batchSize: number;
  concurrency: number;
  skus: number;
}

/** Raw: the same messages with SendMessageBatch, 8 calls in flight, no database (messages/s). */
export async function rawSend(
  client: SQSClient,
  queueUrl: string,
  envelopes: Envelope[],
): Promise<number> {
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < envelopes.length) {
        const chunk = envelopes.slice(next, next + 10);
        next += 10;
        const out = await client.send(
          new SendMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: chunk.map((e, k) => ({
              Id: String(k),
              MessageBody: encodeEnvelope(e).toString(),
              MessageAttributes: envelopeAttributes(e),
            })),
          }),
        );
        if (out.Failed?.length) throw new Error('raw send failed');
      }
    }),
  );
  return envelopes.length / ((performance.now() - started) / 1000);
}

/** One long poll of up to 10 messages: `took` sees them as they arrive, then they are deleted. */
export async function receiveAndDelete(
  client: SQSClient,
  queueUrl: string,
  took: (messages: Message[]) => void,
): Promise<void> {
  const out = await client.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 1,
      MessageAttributeNames: ['All'],
    }),
  );
  const ms = out.Messages ?? [];
  if (ms.length === 0) return;
  took(ms);
  await client.send(
    new DeleteMessageBatchCommand({
      QueueUrl: queueUrl,
      Entries: ms.map((m, k) => ({ Id: String(k), ReceiptHandle: m.ReceiptHandle })),
    }),
  );
}

/** Raw: receive 10 + delete 10, `concurrency` loops, until `total` were received. */
async function rawReceive(
  client: SQSClient,
  queueUrl: string,
  total: number,
  concurrency: number,
): Promise<number> {
  let got = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (got < total) {
        await receiveAndDelete(client, queueUrl, (ms) => {
          got += ms.length;
        });
      }
    }),
  );
  return total / ((performance.now() - started) / 1000);
}

export async function benchSqs(
  env: Env,
  o: SqsBenchOptions,
  suites: ('relay' | 'reserve')[],
): Promise<Record<string, BenchFigure>> {
  const local = await ensureLocalSqs({ endpoint: env.SQS_ENDPOINT, port: env.SQS_LOCAL_PORT });
  const client = createSqsClient({
    endpoint: local.endpoint,
    region: env.AWS_REGION,
    requestTimeoutMs: 25_000,
  });
  const server = env.SQS_ENDPOINT
    ? env.SQS_ENDPOINT
    : `embedded fauxqs (${local.embedded ? 'in this process' : 'joined'})`;
  try {
    return await withBenchEnvironment(
      env,
      'sqs',
      async (scratch) => {
        const dbUrl = scratch.database.url;
        // Fresh queues for every measurement: a stopped trigger's abandoned long poll may still take
        // messages (they stay invisible for the visibility timeout), and PurgeQueue is rate-limited.
        let round = 0;
        const freshQueues = async () => {
          const backend = scratch.backend('sqs', BENCH_BACKEND, {
            client,
            region: env.AWS_REGION,
            prefix: `${scratch.sqsPrefix}${++round}-`,
            visibilityTimeoutSeconds: 60,
          });
          await backend.prepare();
          return { backend, ...(await backend.queues()) };
        };
        const db = new PgDatabase({ connectionString: dbUrl, max: o.concurrency + 2 });
        const figures: Record<string, BenchFigure> = {};
        try {
          for (let i = 0; i < o.skus; i++) await setStock(db, `SKU-${i}`, 1_000_000);
          if (suites.includes('relay')) {
            const raw: number[] = [];
            const relayed: number[] = [];
            for (let run = 1; run <= o.runs; run++) {
              const envelopes = orderEvents(o.messages, o.skus);
              raw.push(await rawSend(client, (await freshQueues()).sourceUrl, envelopes));
              const queues = await freshQueues();
              await db.query('TRUNCATE outbox');
              await insertOutbox(db, envelopes);
              const publisher = queues.backend.publisher('outbox');
              relayed.push(await timedDrain(db, publisher, o, envelopes.length));
              progress(
                `  relay → SQS run ${run}/${o.runs}: raw SendMessageBatch ${Math.round(raw.at(-1) as number)} msg/s, relay ${Math.round(relayed.at(-1) as number)} events/s`,
              );
            }
            const value = Math.round(median(relayed));
            figures['relay.sqs'] = figure(value, 'events/s', Math.round(median(raw)), {
              baselineName: 'raw SendMessageBatch of the same messages, 8 calls in flight',
              goal: 0.7,
              server,
              messages: o.messages,
              runs: o.runs,
              samples: { relay: relayed.map(Math.round), baseline: raw.map(Math.round) },
            });
          }
          if (suites.includes('reserve')) {
            const raw: number[] = [];
            const rawPg: number[] = [];
            const reserved: number[] = [];
            for (let run = 1; run <= o.runs; run++) {
              rawPg.push(await rawTransactions(dbUrl, o.messages, o.concurrency));
              const rawQueues = await freshQueues();
              await rawSend(client, rawQueues.sourceUrl, orderEvents(o.messages, o.skus));
              raw.push(await rawReceive(client, rawQueues.sourceUrl, o.messages, o.concurrency));
              await db.query('TRUNCATE processed_messages, reservations, inventory_outbox');
              await db.query('UPDATE stock SET reserved = 0');
              const queues = await freshQueues();
              await rawSend(client, queues.sourceUrl, orderEvents(o.messages, o.skus));
              const run1 = await timedReserve(queues.backend, db, o.messages, {
                mode: 'lambda',
                logger: createLogger('bench'),
                batchSize: 10,
                concurrency: o.concurrency,
                functionTimeoutMs: 10_000,
              });
              reserved.push(run1.rate);
              progress(
                `  reserve on SQS run ${run}/${o.runs}: raw single-row transactions ${Math.round(rawPg.at(-1) as number)}/s, raw receive+delete ${Math.round(raw.at(-1) as number)} msg/s, reserved ${Math.round(reserved.at(-1) as number)} msg/s`,
              );
            }
            const value = Math.round(median(reserved));
            // the baseline: raw single-row PostgreSQL transactions at the same concurrency;
            // the transport's own limit (receive + delete, no work) is reported beside it
            const transportBaseline = Math.round(median(raw));
            figures['reserve.sqs'] = figure(value, 'messages/s', Math.round(median(rawPg)), {
              baselineName: `raw BEGIN/INSERT one row/COMMIT, ${o.concurrency} connection(s)`,
              goal: 1.0,
              transportBaseline,
              transportBaselineName: `raw ReceiveMessage(10) + DeleteMessageBatch, ${o.concurrency} loops`,
              transportRatio: Math.round((value / transportBaseline) * 100) / 100,
              server,
              messages: o.messages,
              runs: o.runs,
              concurrency: o.concurrency,
              samples: {
                consumer: reserved.map(Math.round),
                baseline: rawPg.map(Math.round),
                transportBaseline: raw.map(Math.round),
              },
            });
          }
        } finally {
          await db.close();
        }
        return figures;
      },
      { transports: ['sqs'], sqsEndpoint: local.endpoint },
    );
  } finally {
    client.destroy();
    await local.stop();
  }
}
