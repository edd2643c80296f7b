import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { type Envelope, newEnvelope } from '../../shared/envelope/envelope.js';
import { MoveTaskShim } from '../helpers/moveTaskShim.js';
import { redriveRefusedAtTheLimit, runCli } from '../helpers/redriveLimit.js';
import { redriveStartsAFreshWindow } from '../helpers/redriveWindow.js';
import { SQS_SERVERS } from '../helpers/sqs.js';
import { SqsInventoryBench } from '../helpers/sqsInventory.js';

const cli = (args: string[], env: Record<string, string>) =>
  promisify(execFile)(process.execPath, ['--import', 'tsx', 'bin/cli.ts', ...args], {
    env: { ...process.env, ...env },
  });

describe.each(SQS_SERVERS)('redrive from the SQS parking lot ($name, CLI)', (server) => {
  let b: SqsInventoryBench;
  afterEach(() => b?.close());

  it('park 20, fix the cause, redrive at a rate → each processed once; a dry run moves none', async () => {
    // no retries: a transient failure parks at once
    // a visibility timeout longer than a batch can take with the database cut: the listing found
    // other than 20 once on a loaded machine, most likely a message back after 6 s, parked twice
    b = await SqsInventoryBench.create(server, `sqs_redrive_${server.name}`, {
      budget: { ...TEST_RETRY_BUDGET, maxAttempts: 0 },
      visibilityTimeoutSeconds: 60,
    });
    await b.stock('SKU-R', 100);
    const { db, proxy } = await b.proxiedDb();
    proxy.cut();
    const orders = Array.from({ length: 20 }, () => {
      const orderId = randomUUID();
      return newEnvelope({
        type: 'order.created',
        aggregate: { type: 'order', id: orderId, version: 1 },
        data: { orderId, sku: 'SKU-R', quantity: 1 },
        correlationId: 'redrive',
        producer: 'order-service',
      });
    });
    await b.send(...orders);
    await b.trigger({ db });
    await waitFor(() => b.lines.filter((l) => l.step === 'parked').length === 20, {
      message: '20 parked',
    });
    proxy.restore(); // the fix

    const env = { SQS_ENDPOINT: b.endpoint, SQS_QUEUE_PREFIX: b.prefix };
    const listed = JSON.parse(
      (await cli(['parked', 'list', '--transport', 'sqs', '--json'], env)).stdout,
    ) as {
      messageId: string;
      reason: string;
      errorClass: string;
    }[];
    expect(listed).toHaveLength(20);
    expect(listed[0]).toMatchObject({ reason: 'exhausted', errorClass: 'transient' });

    const dry = await cli(
      ['parked', 'redrive', '--transport', 'sqs', '--error-class', 'transient', '--dry-run'],
      env,
    );
    expect(dry.stdout).toContain('dry run: scanned 20, matched 20, moved 0');

    const dir = await mkdtemp(join(tmpdir(), 'redrive-sqs-'));
    const firstIds = orders.slice(0, 5).map((o) => o.id);
    const first = await cli(
      [
        'parked',
        'redrive',
        '--transport',
        'sqs',
        '--ids',
        firstIds.join(','),
        '--out',
        join(dir, 'first.json'),
      ],
      env,
    );
    expect(first.stdout).toContain('matched 5, moved 5');
    expect(JSON.parse(await readFile(join(dir, 'first.json'), 'utf8')).moved.sort()).toEqual(
      [...firstIds].sort(),
    );
    const rest = await cli(
      [
        'parked',
        'redrive',
        '--transport',
        'sqs',
        '--error-class',
        'transient',
        '--rate',
        '20',
        '--out',
        join(dir, 'rest.json'),
      ],
      env,
    );
    expect(rest.stdout).toContain('matched 15, moved 15');

    for (const o of orders) await b.waitForLine(o.id, 'effect-committed', 1, 20_000);
    const { rows } = await b.t.db.query<{ n: number; reserved: number }>(
      `SELECT (SELECT count(*)::int FROM processed_messages) AS n, (SELECT reserved FROM stock WHERE sku = 'SKU-R') AS reserved`,
    );
    expect(rows[0]).toEqual({ n: 20, reserved: 20 });
  });
});

describe.each(SQS_SERVERS)('a redriven message gets a fresh retry window ($name)', (server) => {
  let b: SqsInventoryBench;
  afterEach(() => b?.close());

  it('parked for its age, redriven: the whole ladder again, parked again saying it was redriven once', async () => {
    b = await SqsInventoryBench.create(server, `sqs_redrive_window_${server.name}`);
    await redriveStartsAFreshWindow(b, {
      publish: (e) => b.send(e),
      start: (db) => b.trigger({ db }),
    });
  });
});

describe.each(SQS_SERVERS)('redrive everything through an SQS move task ($name, CLI)', (server) => {
  let b: SqsInventoryBench;
  let shim: MoveTaskShim | undefined;
  afterEach(async () => {
    await shim?.close();
    await b?.close();
  });

  it('reports success only once the task completed, with its counts; a failed task fails the command with its reason', async () => {
    // Prepare: 5 parked (no retries, the database down), the consumer stopped
    b = await SqsInventoryBench.create(server, `sqs_move_${server.name}`, {
      budget: { ...TEST_RETRY_BUDGET, maxAttempts: 0 },
    });
    const { db, proxy } = await b.proxiedDb();
    proxy.cut();
    const orders = Array.from({ length: 5 }, () => b.orderCreated('SKU-M', 1));
    await b.send(...orders);
    const consumer = await b.trigger({ db });
    await waitFor(() => b.lines.filter((l) => l.step === 'parked').length === 5, {
      message: '5 parked',
    });
    await consumer.stop();
    const q = await b.backend.queues();
    // the emulators have no move tasks: an endpoint in front of them adds them (300 ms a message)
    shim = await new MoveTaskShim(b.endpoint, {
      sourceArn: q.parkingArn,
      sourceUrl: q.parkingUrl,
      destinationUrl: q.sourceUrl,
    }).start();
    const env = { SQS_ENDPOINT: shim.endpoint, SQS_QUEUE_PREFIX: b.prefix };
    const depth = async (url: string) => {
      const out = await b.client.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
        }),
      );
      // visible or not: the stopped trigger's last long poll may still take one
      const n = out.Attributes ?? {};
      return (
        Number(n.ApproximateNumberOfMessages) + Number(n.ApproximateNumberOfMessagesNotVisible)
      );
    };

    // Act: redrive everything (no selection: one move task)
    const done = await cli(['parked', 'redrive', '--transport', 'sqs'], env);

    // Assess: it returned once the task had moved all five
    expect(shim.tasks).toHaveLength(1);
    expect(done.stdout).toContain(`move task ${shim.tasks[0]?.handle} completed: moved 5 of 5`);
    expect(await depth(q.parkingUrl)).toBe(0);
    expect(await depth(q.sourceUrl)).toBe(5);

    // a task that fails: the command says so, with the reason, and exits 1
    shim.failNext = 'AWS.SimpleQueueService.NonExistentQueue';
    const failed = await cli(['parked', 'redrive', '--transport', 'sqs'], env).then(
      () => undefined,
      (err: { code?: number; stderr?: string }) => err,
    );
    expect(failed?.code).toBe(1);
    expect(failed?.stderr).toMatch(
      /move task \S+ failed: moved 0 of 0 \(AWS\.SimpleQueueService\.NonExistentQueue\)/,
    );
  });
});

describe.each(SQS_SERVERS)('the redrive limit ($name, CLI)', (server) => {
  let b: SqsInventoryBench;
  let shim: MoveTaskShim | undefined;
  afterEach(async () => {
    await shim?.close();
    shim = undefined;
    await b?.close();
  });

  it('redriven once and parked again: refused at REDRIVE_LIMIT 1 and left parked, allowed at 2', async () => {
    b = await SqsInventoryBench.create(server, `sqs_limit_${server.name}`, {
      budget: { ...TEST_RETRY_BUDGET, maxAttempts: 0 },
    });
    await redriveRefusedAtTheLimit(b, {
      transport: 'sqs',
      env: { SQS_ENDPOINT: b.endpoint, SQS_QUEUE_PREFIX: b.prefix },
      publish: (e) => b.send(e),
      start: (db) => b.trigger({ db }),
    });
  });

  it('redrive everything: no move task while a parked message is at the limit (the others one by one); a move task once none is', async () => {
    b = await SqsInventoryBench.create(server, `sqs_limit_all_${server.name}`, {
      budget: { ...TEST_RETRY_BUDGET, maxAttempts: 0 },
    });
    const q = await b.backend.queues();
    shim = await new MoveTaskShim(b.endpoint, {
      sourceArn: q.parkingArn,
      sourceUrl: q.parkingUrl,
      destinationUrl: q.sourceUrl,
    }).start();
    const tasks = shim.tasks;
    const env = { SQS_ENDPOINT: shim.endpoint, SQS_QUEUE_PREFIX: b.prefix };
    const everything = () =>
      runCli(['parked', 'redrive', '--transport', 'sqs', '--timeout', '15'], env);
    let fresh: Envelope | undefined;
    const { refused, allowed } = await redriveRefusedAtTheLimit(b, {
      transport: 'sqs',
      env,
      publish: (e) => b.send(e),
      start: (db) => b.trigger({ db }),
      redrive: async (_id, runEnv) => {
        if (runEnv.REDRIVE_LIMIT)
          return runCli(['parked', 'redrive', '--transport', 'sqs'], runEnv);
        // a second parked message, never redriven: it may go, the one at the limit may not
        fresh = b.orderCreated('SKU-L', 1);
        await b.send(fresh);
        const id = fresh.id;
        await waitFor(async () => (await b.parked()).some((p) => p.diagnosis.messageId === id), {
          timeoutMs: 20_000,
          message: 'second parked',
        });
        return everything();
      },
    });
    expect(refused.stdout).toContain('scanned 2, matched 2, moved 1, skipped 1');
    expect(refused.stdout).toContain(`moved ${fresh?.id}`);
    expect(tasks).toHaveLength(1); // only the allowed run started one
    expect(allowed.stdout).toContain(`move task ${tasks[0]?.handle} completed: moved`);
  });
});
