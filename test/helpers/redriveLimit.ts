import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import type { ParkedEntry } from '../../shared/index.js';
import type { ConsumerRig } from './inventory.js';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `cli parked …` and returns its exit code and output (a non-zero exit is no error here). */
export async function runCli(args: string[], env: Record<string, string>): Promise<CliRun> {
  try {
    const out = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'bin/cli.ts', ...args],
      { env: { ...process.env, ...env } },
    );
    return { code: 0, stdout: out.stdout, stderr: out.stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** REDRIVE_LIMIT=2 with an inbox retention that covers it (15 min + 2 × (14 d + 1 d + 15 min) < 31 d). */
export const LIMIT_TWO = { REDRIVE_LIMIT: '2', INBOX_RETENTION_MS: String(31 * 86_400_000) };

/**
 * The redrive-limit scenario through `cli parked redrive`, on any rig whose budget allows no
 * retry: the database is down, an order is parked; redriven once (count 1) it is parked again;
 * the next redrive is refused at the default limit (1): exit 1, the reason printed, the message
 * still parked with its diagnosis. With `REDRIVE_LIMIT=2` (and an inbox retention to match) it
 * goes through and, the database back, is processed once. `redrive(id, env)` runs the redrive
 * the test is about (by id, or "everything"); `env` reaches the broker (default: the rig's).
 */
export async function redriveRefusedAtTheLimit(
  b: ConsumerRig,
  io: {
    env?: Record<string, string>;
    /** The refused and the allowed redrive (default: `--ids <id>`). */
    redrive?: (id: string, env: Record<string, string>) => Promise<CliRun>;
  } = {},
): Promise<{ refused: CliRun; allowed: CliRun }> {
  const transport = b.backend.transport;
  const cliEnv = io.env ?? b.cliEnv();
  const redrive =
    io.redrive ??
    ((id: string, env: Record<string, string>) =>
      runCli(['parked', 'redrive', '--transport', transport, '--ids', id], env));
  await b.stock('SKU-L', 10);
  const { db, proxy } = await b.proxiedDb();
  await b.start({ db });
  proxy.cut(); // the database is down until the end
  const order = b.orderCreated('SKU-L', 1);
  await b.publish(order);
  const parkedWith = (count: number) => async () =>
    (await b.parked()).find(
      (p: ParkedEntry) =>
        p.diagnosis.messageId === order.id && (p.diagnosis.redriveCount ?? 0) === count,
    );
  await waitFor(parkedWith(0), { timeoutMs: 20_000, message: 'parked' });

  const first = await runCli(
    ['parked', 'redrive', '--transport', transport, '--ids', order.id],
    cliEnv,
  );
  expect(first, first.stderr).toMatchObject({ code: 0 });
  expect(first.stdout).toContain('matched 1, moved 1');
  const again = await waitFor(parkedWith(1), { timeoutMs: 20_000, message: 'parked again' });

  // at the limit (REDRIVE_LIMIT unset: 1): refused, still parked with its diagnosis
  const refused = await redrive(order.id, cliEnv);
  expect(refused.code).toBe(1);
  expect(refused.stdout).toContain(
    io.redrive ? ', skipped 1' : 'scanned 1, matched 1, moved 0, skipped 1',
  );
  expect(refused.stderr).toContain(
    `skipped ${order.id} (redriven 1×, still parked): redrive limit 1 reached: the inbox retention covers 1 redrives; raise INBOX_RETENTION_MS and REDRIVE_LIMIT together`,
  );
  const still = await waitFor(parkedWith(1), { timeoutMs: 20_000, message: 'still parked' });
  expect(still.diagnosis).toEqual(again.diagnosis);

  // the fix, and a limit of 2 (the inbox retention raised with it): it goes through, once
  proxy.restore();
  const allowed = await redrive(order.id, { ...cliEnv, ...LIMIT_TWO });
  expect(allowed.code).toBe(0);
  await b.waitForLine(order.id, 'effect-committed', 1, 20_000);
  expect((await b.parked()).some((p) => p.diagnosis.messageId === order.id)).toBe(false);
  expect(await b.reservation(order.data.orderId as string)).toMatchObject({ status: 'reserved' });
  const { rows } = await b.t.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM processed_messages WHERE message_id = $1',
    [order.id],
  );
  expect(rows[0]?.n).toBe(1);
  return { refused, allowed };
}
