import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { newEnvelope } from '../../shared/envelope/envelope.js';
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
    b = await SqsInventoryBench.create(server, `sqs_redrive_${server.name}`, {
      budget: { ...TEST_RETRY_BUDGET, maxAttempts: 0 },
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
