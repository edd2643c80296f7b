import {
  DeleteMessageBatchCommand,
  type Message,
  ReceiveMessageCommand,
} from '@aws-sdk/client-sqs';
import type { DeliveryJournal, MessageHandler, RunningConsumer } from '../../port/types.js';
import {
  type SqsBackend,
  type SqsDelivery,
  sqsDelivery,
  toSqsRecord,
} from '../../transport/sqs/index.js';
import { backoffDelay, sleep } from '../../util/async.js';

/**
 * The SQS backend's consumer as the Lambda SQS event source runs it, in a minimal loop: receive a
 * batch, hand it to the backend's driver (`lambdaDriver`) as the reserve function does (decide the
 * batch, settle each record), delete the records settled for good and leave the others (a
 * visibility-mode retry, a refused park) to their visibility timeout; a batch given back (the
 * driver throws) stays whole. One invocation at a time.
 */
export async function sqsLambdaLoop(
  backend: SqsBackend,
  handler: MessageHandler,
  options: { journal?: DeliveryJournal | undefined; batchSize?: number | undefined },
): Promise<RunningConsumer> {
  const { driver, mode } = await backend.lambdaDriver(handler, { journal: options.journal });
  const q = await backend.queues();
  const region = backend.config.region;
  const stats = { batches: 0, messages: 0, givenBack: 0 };
  const abort = new AbortController();
  let stopping = false;

  const invoke = async (messages: Message[]) => {
    stats.batches++;
    stats.messages += messages.length;
    const deliveries: SqsDelivery[] = messages.map((m) =>
      sqsDelivery(toSqsRecord(m, q.sourceArn, region), mode),
    );
    const outcomes = await driver.decide(deliveries).catch(() => undefined);
    if (!outcomes) {
      stats.givenBack++; // the invocation failed: every record comes back after its timeout
      return;
    }
    const done: Message[] = [];
    for (let i = 0; i < messages.length; i++) {
      const settled = await driver
        .settle(deliveries[i] as SqsDelivery, outcomes[i] as (typeof outcomes)[number])
        .catch(() => ({ state: 'returned' as const }));
      if (settled.state === 'ack') done.push(messages[i] as Message);
    }
    for (let i = 0; i < done.length; i += 10) {
      await backend.client
        .send(
          new DeleteMessageBatchCommand({
            QueueUrl: q.sourceUrl,
            Entries: done
              .slice(i, i + 10)
              .map((m, k) => ({ Id: String(k), ReceiptHandle: m.ReceiptHandle })),
          }),
        )
        .catch(() => {}); // not deleted: it comes back and the inbox absorbs it
    }
  };

  const loop = (async () => {
    let failures = 0;
    while (!stopping) {
      let messages: Message[];
      try {
        const out = await backend.client.send(
          new ReceiveMessageCommand({
            QueueUrl: q.sourceUrl,
            MaxNumberOfMessages: Math.min(10, options.batchSize ?? 10),
            WaitTimeSeconds: 1,
            MessageAttributeNames: ['All'],
            MessageSystemAttributeNames: ['All'],
          }),
          { abortSignal: abort.signal },
        );
        messages = out.Messages ?? [];
        failures = 0;
      } catch {
        if (stopping) return;
        await sleep(backoffDelay(++failures, 100, 2_000));
        continue;
      }
      if (messages.length > 0) await invoke(messages);
    }
  })();

  return {
    stats,
    async stop() {
      stopping = true;
      abort.abort();
      await loop;
    },
  };
}
