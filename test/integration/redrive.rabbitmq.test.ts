import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import type { Envelope } from '../../shared/envelope/envelope.js';
import { RABBITMQ_NAMES } from '../../shared/transport/rabbitmq/index.js';
import { InventoryBench } from '../helpers/inventory.js';
import { redriveRefusedAtTheLimit, runCli } from '../helpers/redriveLimit.js';
import { redriveStartsAFreshWindow } from '../helpers/redriveWindow.js';
import { RABBITMQ_MANAGEMENT_URL } from '../helpers/services.js';

const cli = (args: string[], env: Record<string, string>) =>
  promisify(execFile)(process.execPath, ['--import', 'tsx', 'bin/cli.ts', ...args], {
    env: { ...process.env, RABBITMQ_MANAGEMENT_URL, ...env },
  });

describe('redrive from the RabbitMQ parking lot (CLI)', () => {
  let b: InventoryBench;
  beforeAll(async () => {
    // no retries: a transient failure parks at once, so 20 parked messages take no time
    b = await InventoryBench.create('redrive', { ...TEST_RETRY_BUDGET, maxAttempts: 0 });
  });
  afterAll(() => b?.close());

  it('park 20, fix the cause, redrive at a rate → each processed once; a dry run moves none', async () => {
    await b.stock('SKU-R', 100);
    const { db, proxy } = await b.proxiedDb();
    await b.worker({ db });
    proxy.cut();
    const orders: Envelope[] = Array.from({ length: 20 }, () => b.orderCreated('SKU-R', 1));
    await b.publish(...orders);
    await waitFor(async () => (await b.parkedCount()) === 20, { message: '20 parked' });
    proxy.restore(); // the fix

    const env = { AMQP_URL: b.vhost.amqpUrl };
    const list = await cli(['parked', 'list', '--transport', 'rabbitmq', '--json'], env);
    const listed = JSON.parse(list.stdout) as {
      messageId: string;
      reason: string;
      errorClass: string;
      via: string;
    }[];
    expect(listed).toHaveLength(20);
    expect(listed[0]).toMatchObject({
      reason: 'exhausted',
      errorClass: 'transient',
      via: 'consumer',
    });
    expect(await b.parkedCount()).toBe(20); // listing moves nothing

    const dry = await cli(
      ['parked', 'redrive', '--transport', 'rabbitmq', '--error-class', 'transient', '--dry-run'],
      env,
    );
    expect(dry.stdout).toContain('dry run: scanned 20, matched 20, moved 0');
    expect(await b.parkedCount()).toBe(20);

    // first five by id, then the rest by error class, at 20/s
    const dir = await mkdtemp(join(tmpdir(), 'redrive-'));
    const firstIds = orders.slice(0, 5).map((o) => o.id);
    const first = await cli(
      [
        'parked',
        'redrive',
        '--transport',
        'rabbitmq',
        '--ids',
        firstIds.join(','),
        '--out',
        join(dir, 'first.json'),
      ],
      env,
    );
    expect(first.stdout).toContain('scanned 20, matched 5, moved 5');
    expect(JSON.parse(await readFile(join(dir, 'first.json'), 'utf8')).moved.sort()).toEqual(
      [...firstIds].sort(),
    );
    const started = Date.now();
    const rest = await cli(
      [
        'parked',
        'redrive',
        '--transport',
        'rabbitmq',
        '--error-class',
        'transient',
        '--since',
        '1h',
        '--rate',
        '20',
        '--out',
        join(dir, 'rest.json'),
      ],
      env,
    );
    expect(rest.stdout).toContain('matched 15, moved 15');
    expect(Date.now() - started).toBeGreaterThanOrEqual(700); // 15 at 20/s: paced, not a burst

    for (const o of orders) await b.waitForLine(o.id, 'effect-committed', 1, 20_000);
    const { rows } = await b.t.db.query<{ n: number; reserved: number }>(
      `SELECT (SELECT count(*)::int FROM processed_messages) AS n, (SELECT reserved FROM stock WHERE sku = 'SKU-R') AS reserved`,
    );
    expect(rows[0]).toEqual({ n: 20, reserved: 20 });
    expect(await b.parkedCount()).toBe(0);
    // redriven copies kept their id and restarted their attempts; audit.orders got no copy
    const again = b.lines.filter((l) => l.step === 'received' && orders[0]?.id === l.messageId);
    expect(again.at(-1)?.attempt).toBe(0);
    expect(await b.depth(RABBITMQ_NAMES.auditQueue)).toBe(20);
  });
});

describe('a redriven message gets a fresh retry window (RabbitMQ worker)', () => {
  let b: InventoryBench;
  beforeAll(async () => {
    b = await InventoryBench.create('redrive_window');
  });
  afterAll(() => b?.close());

  it('parked for its age, redriven: the whole ladder again, parked again saying it was redriven once', () =>
    redriveStartsAFreshWindow(b, {
      publish: (e) => b.publish(e),
      start: (db) => b.worker({ db }),
    }));
});

describe('the redrive limit (RabbitMQ, CLI)', () => {
  let b: InventoryBench;
  beforeAll(async () => {
    b = await InventoryBench.create('redrive_limit', { ...TEST_RETRY_BUDGET, maxAttempts: 0 });
  });
  afterAll(() => b?.close());

  it('redriven once and parked again: refused at REDRIVE_LIMIT 1 and left parked, allowed at 2; --beyond-limit says the risk', async () => {
    const env = { AMQP_URL: b.vhost.amqpUrl };
    await redriveRefusedAtTheLimit(b, {
      transport: 'rabbitmq',
      env,
      publish: (e) => b.publish(e),
      start: (db) => b.worker({ db }),
      redrive: async (id, runEnv) => {
        if (runEnv.REDRIVE_LIMIT)
          return runCli(['parked', 'redrive', '--transport', 'rabbitmq', '--ids', id], runEnv);
        // before the refusal: a dry run with the override would move it, and says what that risks
        const beyond = await runCli(
          [
            'parked',
            'redrive',
            '--transport',
            'rabbitmq',
            '--ids',
            id,
            '--dry-run',
            '--beyond-limit',
          ],
          runEnv,
        );
        expect(beyond).toMatchObject({ code: 0 });
        expect(beyond.stdout).toContain('dry run: scanned 1, matched 1, moved 0, skipped 0');
        expect(beyond.stderr).toContain('apply its effect a second time');
        return runCli(['parked', 'redrive', '--transport', 'rabbitmq', '--ids', id], runEnv);
      },
    });
  });
});
