import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import type { Envelope } from '../../shared/index.js';
import { CONSUMER_RIGS, inOrder } from '../helpers/consumerRigs.js';
import type { ConsumerRig } from '../helpers/inventory.js';
import { type CliRun, redriveRefusedAtTheLimit, runCli } from '../helpers/redriveLimit.js';
import { redriveStartsAFreshWindow } from '../helpers/redriveWindow.js';

/** `cli parked …` on the rig's transport; a non-zero exit fails the test with its output. */
async function parked(b: ConsumerRig, args: string[], env = b.cliEnv()): Promise<CliRun> {
  const run = await runCli(['parked', ...args, '--transport', b.backend.transport], env);
  expect(run.code, run.stderr).toBe(0);
  return run;
}

/** No retries: a transient failure parks at once, so parking many takes no time. */
const NO_RETRIES = { ...TEST_RETRY_BUDGET, maxAttempts: 0 };

describe.each(CONSUMER_RIGS)(
  'redrive from the parking lot ($name, CLI)',
  { concurrent: true },
  (h) => {
    let b: ConsumerRig | undefined;
    afterEach(async () => {
      await b?.close();
      b = undefined;
    });

    it(
      'park 20, fix the cause, redrive at a rate → each processed once; a dry run moves none',
      inOrder,
      async () => {
        // a visibility timeout longer than a batch can take with the database cut: the listing found
        // other than 20 once on a loaded machine (SQS), most likely a message back after 6 s, parked twice
        const rig = await h.setup('redrive', { budget: NO_RETRIES, visibilityTimeoutSeconds: 60 });
        b = rig;
        await rig.stock('SKU-R', 100);
        const { db, proxy } = await rig.proxiedDb();
        await rig.start({ db });
        proxy.cut();
        const orders: Envelope[] = Array.from({ length: 20 }, () => rig.orderCreated('SKU-R', 1));
        await rig.publish(...orders);
        await waitFor(
          async () =>
            rig.lines.filter((l) => l.step === 'parked').length === 20 &&
            (await rig.parkedCount()) === 20,
          // moto's approximate count lags under load
          { timeoutMs: 45_000, message: '20 parked' },
        );
        proxy.restore(); // the fix

        const listed = JSON.parse((await parked(rig, ['list', '--json'])).stdout) as {
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
        expect(await rig.parkedCount()).toBe(20); // listing moves nothing

        const dry = await parked(rig, ['redrive', '--error-class', 'transient', '--dry-run']);
        expect(dry.stdout).toContain('dry run: scanned 20, matched 20, moved 0');
        expect(await rig.parkedCount()).toBe(20);

        // first five by id, then the rest by error class, at 20/s
        const dir = await mkdtemp(join(tmpdir(), 'redrive-'));
        const firstIds = orders.slice(0, 5).map((o) => o.id);
        const first = await parked(rig, [
          'redrive',
          '--ids',
          firstIds.join(','),
          '--out',
          join(dir, 'first.json'),
        ]);
        expect(first.stdout).toContain('scanned 20, matched 5, moved 5');
        expect(JSON.parse(await readFile(join(dir, 'first.json'), 'utf8')).moved.sort()).toEqual(
          [...firstIds].sort(),
        );
        const started = Date.now();
        const rest = await parked(rig, [
          'redrive',
          '--error-class',
          'transient',
          '--since',
          '1h',
          '--rate',
          '20',
          '--out',
          join(dir, 'rest.json'),
        ]);
        expect(rest.stdout).toContain('matched 15, moved 15');
        expect(Date.now() - started).toBeGreaterThanOrEqual(700); // 15 at 20/s: paced, not a burst

        for (const o of orders) await rig.waitForLine(o.id, 'effect-committed', 1, 20_000);
        const { rows } = await rig.t.db.query<{ n: number; reserved: number }>(
          `SELECT (SELECT count(*)::int FROM processed_messages) AS n, (SELECT reserved FROM stock WHERE sku = 'SKU-R') AS reserved`,
        );
        expect(rows[0]).toEqual({ n: 20, reserved: 20 });
        expect(await rig.parkedCount()).toBe(0);
        // redriven copies kept their id and restarted their attempts
        const again = rig.lines.filter(
          (l) => l.step === 'received' && orders[0]?.id === l.messageId,
        );
        expect(again.at(-1)?.attempt).toBe(0);
        // a tap (RabbitMQ's audit.orders) got the published copies, no redriven one
        if (rig.tapCopies) expect(await rig.tapCopies()).toBe(20);
      },
    );

    it(
      'a redriven message gets a fresh retry window: the whole ladder again, parked again saying it was redriven once',
      inOrder,
      async () => {
        const rig = await h.setup('redrive_window');
        b = rig;
        await redriveStartsAFreshWindow(rig);
      },
    );

    it(
      'the redrive limit: redriven once and parked again, refused at REDRIVE_LIMIT 1 and left parked, allowed at 2; --beyond-limit says the risk',
      inOrder,
      async () => {
        const rig = await h.setup('redrive_limit', { budget: NO_RETRIES });
        b = rig;
        const byId = (id: string, env: Record<string, string>) =>
          runCli(['parked', 'redrive', '--transport', rig.backend.transport, '--ids', id], env);
        const { refused } = await redriveRefusedAtTheLimit(rig, {
          redrive: async (id, env) => {
            if (env.REDRIVE_LIMIT) return byId(id, env);
            // before the refusal: a dry run with the override would move it, and says what that risks
            const beyond = await parked(
              rig,
              ['redrive', '--ids', id, '--dry-run', '--beyond-limit'],
              env,
            );
            expect(beyond.stdout).toContain('dry run: scanned 1, matched 1, moved 0, skipped 0');
            expect(beyond.stderr).toContain('apply its effect a second time');
            return byId(id, env);
          },
        });
        expect(refused.stdout).toContain('scanned 1, matched 1, moved 0, skipped 1');
      },
    );
  },
);
