import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import type { Envelope } from '../../shared/index.js';
import { inOrder, SQS_RIGS } from '../helpers/consumerRigs.js';
import { MoveTaskShim } from '../helpers/moveTaskShim.js';
import { redriveRefusedAtTheLimit, runCli } from '../helpers/redriveLimit.js';
import type { SqsInventoryRig } from '../helpers/sqsInventory.js';

/**
 * What only SQS has: "redrive everything" is one broker-side move task (`StartMessageMoveTask`).
 * The emulators have no move tasks: an endpoint in front of them adds them (300 ms a message).
 * The redrive tests every transport runs are in redrive.test.ts.
 */
describe.each(SQS_RIGS)(
  'redrive everything through an SQS move task ($name, CLI)',
  { concurrent: true },
  (h) => {
    let b: SqsInventoryRig | undefined;
    let shim: MoveTaskShim | undefined;
    afterEach(async () => {
      await shim?.close();
      shim = undefined;
      await b?.close();
      b = undefined;
    });

    /** A move-task endpoint in front of the rig's server, from its parking queue to its source. */
    const moveTasks = async (rig: SqsInventoryRig) => {
      const q = await rig.backend.queues();
      shim = await new MoveTaskShim(rig.endpoint, {
        sourceArn: q.parkingArn,
        sourceUrl: q.parkingUrl,
        destinationUrl: q.sourceUrl,
      }).start();
      return { q, shim, env: { SQS_ENDPOINT: shim.endpoint, SQS_QUEUE_PREFIX: rig.prefix } };
    };

    it(
      'reports success only once the task completed, with its counts; a failed task fails the command with its reason',
      inOrder,
      async () => {
        // Prepare: 5 parked (no retries, the database down), the consumer stopped
        const rig = await h.setup('sqs_move', { budget: { ...TEST_RETRY_BUDGET, maxAttempts: 0 } });
        b = rig;
        const { db, proxy } = await rig.proxiedDb();
        proxy.cut();
        const orders = Array.from({ length: 5 }, () => rig.orderCreated('SKU-M', 1));
        await rig.send(...orders);
        const consumer = await rig.trigger({ db });
        await waitFor(() => rig.lines.filter((l) => l.step === 'parked').length === 5, {
          message: '5 parked',
        });
        await consumer.stop();
        const { q, shim, env } = await moveTasks(rig);
        const depth = async (url: string) => {
          const out = await rig.client.send(
            new GetQueueAttributesCommand({
              QueueUrl: url,
              AttributeNames: [
                'ApproximateNumberOfMessages',
                'ApproximateNumberOfMessagesNotVisible',
              ],
            }),
          );
          // visible or not: the stopped trigger's last long poll may still take one
          const n = out.Attributes ?? {};
          return (
            Number(n.ApproximateNumberOfMessages) + Number(n.ApproximateNumberOfMessagesNotVisible)
          );
        };

        // Act: redrive everything (no selection: one move task)
        const done = await runCli(['parked', 'redrive', '--transport', 'sqs'], env);

        // Assess: it returned once the task had moved all five
        expect(done.code, done.stderr).toBe(0);
        expect(shim.tasks).toHaveLength(1);
        expect(done.stdout).toContain(`move task ${shim.tasks[0]?.handle} completed: moved 5 of 5`);
        expect(await depth(q.parkingUrl)).toBe(0);
        expect(await depth(q.sourceUrl)).toBe(5);

        // a task that fails: the command says so, with the reason, and exits 1
        shim.failNext = 'AWS.SimpleQueueService.NonExistentQueue';
        const failed = await runCli(['parked', 'redrive', '--transport', 'sqs'], env);
        expect(failed.code).toBe(1);
        expect(failed.stderr).toMatch(
          /move task \S+ failed: moved 0 of 0 \(AWS\.SimpleQueueService\.NonExistentQueue\)/,
        );
      },
    );

    it(
      'redrive everything: no move task while a parked message is at the limit (the others one by one); a move task once none is',
      inOrder,
      async () => {
        const rig = await h.setup('sqs_limit_all', {
          budget: { ...TEST_RETRY_BUDGET, maxAttempts: 0 },
        });
        b = rig;
        const { shim, env } = await moveTasks(rig);
        const tasks = shim.tasks;
        const everything = () =>
          runCli(['parked', 'redrive', '--transport', 'sqs', '--timeout', '15'], env);
        let fresh: Envelope | undefined;
        const { refused, allowed } = await redriveRefusedAtTheLimit(rig, {
          env,
          redrive: async (_id, runEnv) => {
            if (runEnv.REDRIVE_LIMIT)
              return runCli(['parked', 'redrive', '--transport', 'sqs'], runEnv);
            // a second parked message, never redriven: it may go, the one at the limit may not
            fresh = rig.orderCreated('SKU-L', 1);
            await rig.send(fresh);
            const id = fresh.id;
            await waitFor(
              async () => (await rig.parked()).some((p) => p.diagnosis.messageId === id),
              {
                timeoutMs: 20_000,
                message: 'second parked',
              },
            );
            return everything();
          },
        });
        expect(refused.stdout).toContain('scanned 2, matched 2, moved 1, skipped 1');
        expect(refused.stdout).toContain(`moved ${fresh?.id}`);
        expect(tasks).toHaveLength(1); // only the allowed run started one
        expect(allowed.stdout).toContain(`move task ${tasks[0]?.handle} completed: moved`);
      },
    );
  },
);
