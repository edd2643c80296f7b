import type { Message } from '@aws-sdk/client-sqs';
import { Consumer } from 'sqs-consumer';
import { createSqsClient } from '../shared/transport/sqs/index.js';
import { eventIdOf, journalStep } from './effect.js';
import { createQueueWithRedrive } from './powertools.js';
import type { PeerConsumer, PeerContext, RunningPeer } from './types.js';

/** sqs-consumer's default long poll (`waitTimeSeconds`). */
const WAIT_TIME_SECONDS = 20;

export interface SqsConsumerPeerOptions {
  /**
   * sqs-consumer's `visibilityTimeout` option (seconds, sent with each ReceiveMessage). Unset by
   * default: the queue's own visibility timeout applies (SQS's default, 30 s).
   */
  visibilityTimeoutSeconds?: number;
}

/**
 * bbc/sqs-consumer: a long-polling loop that calls `handleMessage` for each received message and
 * deletes it once the handler resolves with the message; a throw leaves it to its visibility
 * timeout and SQS's RedrivePolicy. No deduplication of its own.
 */
export function sqsConsumerPeerWith(options: SqsConsumerPeerOptions = {}): PeerConsumer {
  return {
    id: 'peer-sqs-consumer',
    transport: 'sqs',
    packages: ['sqs-consumer', '@aws-sdk/client-sqs'],
    setup:
      'sqs-consumer README, "Usage" (Consumer.create with queueUrl, an SQS client and an async ' +
      'handleMessage that returns the message to have it deleted; error and processing_error ' +
      'listeners) and "Graceful shutdowns" (stop() with pollingCompleteWaitTimeMs); defaults ' +
      `otherwise: long polling waitTimeSeconds ${WAIT_TIME_SECONDS}, no heartbeat, no ` +
      'handleMessageTimeout, terminateVisibilityTimeout off, ' +
      (options.visibilityTimeoutSeconds
        ? `visibilityTimeout ${options.visibilityTimeoutSeconds} s. `
        : "the queue's visibility timeout (SQS default 30 s). ") +
      'batchSize (up to 10, its parallelism within one poll) from the run; the library has no ' +
      "concurrency option, so the run's concurrency is that many Consumer instances on the queue. " +
      'Failures go to a dead-letter queue through the SQS RedrivePolicy, as its README advises.',
    guarantee:
      'At-least-once delivery: a message is deleted after its handler resolves, and comes back ' +
      'after the visibility timeout when the handler throws or the delete fails; no ' +
      'deduplication, so a redelivered or re-sent message is applied again.',
    start: (ctx) => startSqsConsumer(ctx, options),
  };
}

/** The peer with sqs-consumer's defaults. */
export const sqsConsumerPeer: PeerConsumer = sqsConsumerPeerWith();

async function startSqsConsumer(
  ctx: PeerContext,
  options: SqsConsumerPeerOptions,
): Promise<RunningPeer> {
  if (!ctx.sqs) throw new Error('peer-sqs-consumer needs ctx.sqs');
  // the run's visibility timeout (the lab's scaled settings) over the option, else SQS's default
  const visibility = ctx.visibilityTimeoutSeconds ?? options.visibilityTimeoutSeconds;
  const queues = await createQueueWithRedrive(ctx.sqs.client, ctx.namespace, {
    maxReceiveCount: ctx.maxDeliveries,
    ...(visibility ? { visibilityTimeoutSeconds: visibility } : {}),
  });
  // A client of its own: long polls of 20 s need a longer request timeout than 20 s.
  const client = createSqsClient({ ...ctx.sqs, requestTimeoutMs: 25_000 });
  const idOf = (m: Message) =>
    eventIdOf(m.Body, m.MessageAttributes?.event_id?.StringValue, m.MessageId);
  const attemptOf = (m: Message) => Number(m.Attributes?.ApproximateReceiveCount ?? 1);
  const step = (s: 'received' | 'acked', m: Message) =>
    journalStep(ctx.journal, s, idOf(m), attemptOf(m));

  const consumers = Array.from({ length: Math.max(1, ctx.concurrency) }, () => {
    const consumer = Consumer.create({
      queueUrl: queues.input.queueUrl,
      sqs: client,
      batchSize: Math.min(10, Math.max(1, ctx.batchSize)),
      waitTimeSeconds: WAIT_TIME_SECONDS,
      // the receive count, for the handler's `attempt` (and the journal)
      messageSystemAttributeNames: ['ApproximateReceiveCount'],
      // the event id the producer put beside the body (the journal's message id for a poison body)
      messageAttributeNames: ['event_id'],
      ...(visibility ? { visibilityTimeout: visibility } : {}),
      // "Graceful shutdowns": wait for the last long poll plus its handlers
      pollingCompleteWaitTimeMs: (WAIT_TIME_SECONDS + 10) * 1000,
      handleMessage: async (message) => {
        await ctx.handle(message.Body ?? '', {
          messageId: idOf(message),
          attempt: attemptOf(message),
        });
        return message; // returning the message has it deleted
      },
    });
    // The README's listeners (an EventEmitter without an 'error' listener throws). A handler
    // failure is expected here: the message stays and SQS redelivers it.
    consumer.on('error', () => {});
    consumer.on('processing_error', () => {});
    // 'received' when the handler is about to be called; 'acked' once the message is deleted.
    // There is no 'duplicate': sqs-consumer does no deduplication.
    if (ctx.journal) {
      consumer.on('message_received', (m) => step('received', m));
      consumer.on('message_processed', (m) => step('acked', m));
    }
    consumer.start();
    return consumer;
  });

  return {
    input: queues.input,
    async stop() {
      // 'stopped' comes once the last poll and its handlers are done (up to one long poll).
      await Promise.all(
        consumers.map(
          (c) =>
            new Promise<void>((resolve) => {
              c.once('stopped', () => resolve());
              c.stop();
            }),
        ),
      );
      client.destroy();
    },
  };
}
