import { randomUUID } from 'node:crypto';
import {
  DeleteMessageCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import type { Outcome, RetryBudget } from '../../shared/index.js';
import type { SqsRetryMode } from '../../shared/transport/sqs/constants.js';
import { sqsDelivery, toSqsRecord } from '../../shared/transport/sqs/index.js';
import { sqsBackend } from '../../shared/transport/sqs/SqsBackend.js';
import { SqsSettle } from '../../shared/transport/sqs/SqsSettle.js';
import { createSqsRig, SQS_SERVERS, type SqsRig } from '../helpers/sqs.js';

/**
 * SQS retries get the budget's documented jitter (`RETRY_JITTER`, ±fraction of the step, the
 * range RabbitMQ's jitter buckets span), in whole seconds, in both retry modes. Step 4 s with
 * jitter 0.5: delays of 2 … 6 s.
 */
const BUDGET: RetryBudget = { ladderMs: [4_000], maxAttempts: 1, maxAgeMs: 60_000, jitter: 0.5 };
const LOW_MS = 2_000;
const HIGH_MS = 6_000;

const delayOf = (detail: string | undefined) => Number(/in (\d+) ms/.exec(detail ?? '')?.[1]);

describe.each(SQS_SERVERS)('SQS retry jitter ($name)', (server) => {
  let f: SqsRig;
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await cleanup?.();
    cleanup = undefined;
    await f?.close();
  });

  const sendAndReceive = async (count: number): Promise<Message[]> => {
    const ids = Array.from({ length: count }, () => randomUUID());
    for (const id of ids) {
      await f.client.send(
        new SendMessageCommand({
          QueueUrl: f.queues.sourceUrl,
          MessageBody: JSON.stringify({ id }),
          MessageAttributes: { event_id: { DataType: 'String', StringValue: id } },
        }),
      );
    }
    const got: Message[] = [];
    await waitFor(async () => {
      const out = await f.client.send(
        new ReceiveMessageCommand({
          QueueUrl: f.queues.sourceUrl,
          MaxNumberOfMessages: 10,
          VisibilityTimeout: 30,
          MessageAttributeNames: ['All'],
          MessageSystemAttributeNames: ['All'],
        }),
      );
      got.push(...(out.Messages ?? []));
      return got.length >= count;
    });
    return got;
  };

  const idOf = (m: Message) => m.MessageAttributes?.event_id?.StringValue;

  it.each(['visibility', 'resend'] as SqsRetryMode[])(
    '%s: the reserve driver jitters each retry within step ± jitter (whole seconds), and equal attempts differ',
    async (mode) => {
      f = await createSqsRig(server, `sqs_jitter_${mode}`, { budget: BUDGET });
      // the rig's backend on the same queues, in this retry mode
      const backend = sqsBackend({ ...f.backend.config, mode });
      cleanup = () => backend.close();
      const messages = await sendAndReceive(10);
      const { driver } = await backend.lambdaDriver(async (batch) => batch.map(() => retry));
      const retry: Outcome = {
        kind: 'retry',
        delayMs: BUDGET.ladderMs[0] as number,
        attempt: 1,
        errorClass: 'transient',
        error: 'TransientDbError: deadlock',
        infrastructure: false,
      };
      const delays: number[] = [];
      for (const m of messages) {
        const settled = await driver.settle(
          sqsDelivery(toSqsRecord(m, f.queues.sourceArn), mode),
          retry,
        );
        delays.push(delayOf(settled.detail));
      }
      for (const d of delays) {
        expect(d).toBeGreaterThanOrEqual(LOW_MS);
        expect(d).toBeLessThanOrEqual(HIGH_MS);
        expect(d % 1000).toBe(0);
      }
      // ten draws over five whole seconds: all equal has a probability of 5⁻⁹
      expect(new Set(delays).size).toBeGreaterThan(1);
    },
  );

  it.each(['visibility', 'resend'] as SqsRetryMode[])(
    '%s: two retries of the same attempt at the two ends of the range come back in that order',
    async (mode) => {
      f = await createSqsRig(server, `sqs_jitter_order_${mode}`, { budget: BUDGET });
      const [early, late] = (await sendAndReceive(2)) as [Message, Message];
      const draws = [0, 0.999_999];
      const settle = new SqsSettle(
        { client: f.client },
        {
          sourceUrl: f.queues.sourceUrl,
          parkingUrl: f.queues.parkingUrl,
          mode,
          jitter: BUDGET.jitter,
          random: () => draws.shift() ?? 0.5,
        },
      );
      const request = {
        delayMs: BUDGET.ladderMs[0] as number,
        attempt: 1,
        errorClass: 'transient' as const,
        error: 'TransientDbError: deadlock',
        firstFailureAt: new Date().toISOString(),
      };
      const a = await settle.retryLater(
        sqsDelivery(toSqsRecord(early, f.queues.sourceArn), mode),
        request,
      );
      const b = await settle.retryLater(
        sqsDelivery(toSqsRecord(late, f.queues.sourceArn), mode),
        request,
      );
      expect([delayOf(a.detail), delayOf(b.detail)]).toEqual([LOW_MS, HIGH_MS]);
      if (mode === 'resend') {
        // the originals are settled (deleted by the trigger on success): here, by the test
        for (const m of [early, late]) {
          await f.client.send(
            new DeleteMessageCommand({
              QueueUrl: f.queues.sourceUrl,
              ReceiptHandle: m.ReceiptHandle,
            }),
          );
        }
      }

      // On the emulator: the early one is back while the late one is still invisible.
      const seen: (string | undefined)[][] = [];
      await waitFor(
        async () => {
          const out = await f.client.send(
            new ReceiveMessageCommand({
              QueueUrl: f.queues.sourceUrl,
              MaxNumberOfMessages: 10,
              WaitTimeSeconds: 1,
              VisibilityTimeout: 30,
              MessageAttributeNames: ['All'],
            }),
          );
          const ids = (out.Messages ?? []).map(idOf);
          if (ids.length > 0) seen.push(ids);
          return seen.flat().includes(idOf(late));
        },
        { timeoutMs: 20_000, intervalMs: 100, message: 'both retries back' },
      );
      expect(seen[0]).toEqual([idOf(early)]);
    },
  );
});
