import { copyFile, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type RunningEventSource,
  startAmazonMqEventSource,
  startSqsEventSource,
} from '../../devkit/lambda/eventSources.js';
import { scheduledEvent } from '../../devkit/triggers/scheduleTrigger.js';
import { waitFor } from '../../devkit/waitFor.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { KICK_SOURCE } from '../../shared/outbox/kick.js';
import { serviceMigrations } from '../../shared/pipeline/schema.js';
import { sleep } from '../../shared/util/async.js';
import { type BundleRig, bundleRig } from '../helpers/bundles.js';
import { AMQP_URL } from '../helpers/services.js';

/**
 * Aurora's pause as a state the deployment lives with, shown on the deployed bundles: the local
 * deployment's Data API endpoint pauses its cluster after the template's `SecondsUntilAutoPause`
 * (time scaled by `SCALE`), and a call then starts a resume that refuses calls for its duration.
 * Every function but place-order waits it out within its own budget: a day at rest raises no
 * alarm metric, a migration deploys onto a paused cluster, and each consumer settles the batch it
 * met the resume with, with no invocation error and no retry attempt spent.
 */

/** Time scale of the simulated day: a minute lasts 50 ms, an hour 3 s, the day 72 s. */
const SCALE = 1 / 1200;
/**
 * Time scale of the idle period before a pause: 300 s → 1 s. At the day's scale it would be
 * 250 ms, no longer than this machine's own gaps between two calls of one invocation, so the
 * cluster would pause in the middle of a sweep; 1 s is still far below the sweeps' interval.
 */
const PAUSE_SCALE = 1 / 300;
const MINUTE = 60_000 * SCALE;
const HOUR = 60 * MINUTE;
/** A resume as AWS gives it (up to 15 s): what the functions' real timeouts must cover. */
const REAL_RESUME_MS = 15_000;

/** The EMF records (CloudWatch metrics) a function logged since line `from`. */
function emf(f: BundleRig, fn: string, from = 0): Record<string, unknown>[] {
  return (f.logs.get(fn) ?? [])
    .slice(from)
    .filter((l) => l.startsWith('{') && l.includes('"_aws"'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

const resumesMet = (f: BundleRig, fn: string, from = 0) =>
  emf(f, fn, from).reduce(
    (n, m) => n + (typeof m.DatabaseResumes === 'number' ? m.DatabaseResumes : 0),
    0,
  );

const kick = { source: KICK_SOURCE, from: 'bundles-pause-test' };

/**
 * Each consumer of one transport meets a resume (AWS's 15 s, real time). An order event is
 * published while the cluster runs; the cluster pauses; reserve's event source starts and its
 * first call starts the resume. Reserve's result is published (the cluster is up again); the
 * cluster pauses again; order-results' event source starts and meets the second resume. Each
 * batch is settled in its first invocation: the functions' 30 s timeout less the 1 s deadline
 * margin and the wait's 5 s margin leaves 24 s of wait, above the resume.
 */
async function consumersRideOutAResume(
  f: BundleRig,
  transport: 'sqs' | 'rabbitmq',
  sources: RunningEventSource[],
): Promise<void> {
  const reserveFn = transport === 'sqs' ? 'reserve-inventory-sqs' : 'reserve-inventory-rabbitmq';
  const resultsFn = transport === 'sqs' ? 'order-results-sqs' : 'order-results-rabbitmq';
  const start = async (fn: string) => {
    const source = await (transport === 'sqs'
      ? startSqsEventSource(f.deployment, fn)
      : startAmazonMqEventSource(f.deployment, fn, {
          amqpUrl: AMQP_URL,
          vhost: f.vhost?.vhost as string,
        }));
    sources.push(source);
    return source;
  };
  const db = f.deployment.database;
  /**
   * Pauses the cluster now (as after 5 idle minutes), resumes taking AWS's 15 s; the idle period
   * back to the template's 300 s, so that it does not pause again within the test.
   */
  const pause = () => {
    db.setAutoPause(f.deployment.autoPauseOf({ timeScale: 1, resumeMs: REAL_RESUME_MS }));
    db.pause();
    expect(db.pauseStats().state).toBe('paused');
  };
  /**
   * Starts `fn`'s event source on a paused cluster and waits until `messageId` is acked: the
   * function met the resume (one, counted in its DatabaseResumes), no invocation failed, nothing
   * was given back, no retry scheduled: settled on its first delivery.
   */
  const ridesOut = async (fn: string, messageId: string) => {
    const before = db.pauseStats();
    const errors = f.deployment.fn(fn).stats.errors;
    const logged = f.logs.get(fn)?.length ?? 0;
    const source = await start(fn);
    await f.journal.waitForLine(messageId, 'acked', 1, 60_000);
    const steps = f.journal.linesFor(messageId);
    expect(steps.map((l) => l.step)).not.toContain('retry-scheduled');
    expect(steps.map((l) => l.step)).not.toContain('abandoned');
    expect(
      steps.every((l) => l.attempt === 0 && !l.redelivered),
      JSON.stringify(steps),
    ).toBe(true);
    expect(f.deployment.fn(fn).stats.errors - errors).toBe(0);
    expect(source.stats.givenBack ?? 0).toBe(0);
    expect(db.pauseStats().resumes - before.resumes).toBe(1);
    expect(resumesMet(f, fn, logged)).toBeGreaterThan(0);
  };

  // the order event is published while the cluster runs
  db.setAutoPause(undefined);
  await f.inventoryDb.query(
    "INSERT INTO stock (sku, available) VALUES ('SKU-PAUSE', 10) ON CONFLICT (sku) DO NOTHING",
  );
  const order = await new OrderService({ db: f.db.db }).place({
    sku: 'SKU-PAUSE',
    quantity: 2,
    correlationId: 'pause-consumers',
  });
  await f.deployment.fn('outbox-relay').invokeOrThrow(kick);
  const { rows: published } = await f.db.db.query<{ published: boolean }>(
    'SELECT published_at IS NOT NULL AS published FROM outbox WHERE id = $1',
    [order.eventId],
  );
  expect(published[0]?.published).toBe(true);

  pause();
  await ridesOut(reserveFn, order.eventId);
  // reserve kicked the relay: the result is in the results queue once its row is published
  const result = await waitFor(
    async () => {
      const { rows } = await f.inventoryDb.query<{ id: string; published: boolean }>(
        `SELECT id, published_at IS NOT NULL AS published FROM inventory_outbox
          WHERE payload->>'orderId' = $1`,
        [order.orderId],
      );
      return rows[0]?.published ? rows[0] : undefined;
    },
    { timeoutMs: 30_000, message: 'the result published to the results queue' },
  );
  await f.deployment.asyncIdle();

  pause();
  await ridesOut(resultsFn, result.id);
  // each side in its service's database
  const { rows: orders } = await f.db.db.query(
    'SELECT reservation_status FROM orders WHERE id = $1',
    [order.orderId],
  );
  expect(orders).toEqual([{ reservation_status: 'reserved' }]);
  const { rows } = await f.inventoryDb.query(
    'SELECT status, quantity FROM reservations WHERE order_id = $1',
    [order.orderId],
  );
  expect(rows).toEqual([{ status: 'reserved', quantity: 2 }]);
}

describe('the SQS deployment with a cluster that pauses', () => {
  let f: BundleRig;
  let migrationsDir: string;
  const sources: RunningEventSource[] = [];

  beforeAll(async () => {
    migrationsDir = await mkdtemp(join(tmpdir(), 'rm-migrations-'));
    f = await bundleRig('sqs', 'bundles_pause_sqs', {
      // the relay's sweep settings on the simulated day's clock
      context: {
        pipeline: JSON.stringify({
          relay: {
            sweepQuietMs: Math.round(600_000 * SCALE),
            sweepIntervalMs: Math.round(3_600_000 * SCALE),
            lingerMs: 100,
          },
        }),
      },
      // migrate reads a copy of its bundled migrations, so that a test can add one
      environment: { MIGRATIONS_DIR: migrationsDir },
      autoPause: { timeScale: PAUSE_SCALE, resumeMs: 15_000 * PAUSE_SCALE },
    });
    const bundled = join(
      f.deployment.assembly.function('migrate').assetDir as string,
      'migrations',
    );
    for (const file of await readdir(bundled))
      await copyFile(join(bundled, file), join(migrationsDir, file));
    // the first deploy, on a running cluster: both services' schemas and the logins
    f.deployment.database.setAutoPause(undefined);
    expect(await f.deployment.customResource('Migrations', 'Create')).toMatchObject({
      status: 'SUCCESS',
      data: {
        ordersApplied: (await serviceMigrations('orders')).length,
        inventoryApplied: (await serviceMigrations('inventory')).length,
      },
    });
  }, 300_000);

  afterAll(async () => {
    for (const s of sources) await s.stop().catch(() => {});
    await f?.close();
    await rm(migrationsDir, { recursive: true, force: true });
  }, 60_000);

  it('the cluster pauses after the template’s SecondsUntilAutoPause (300 s, scaled)', async () => {
    expect(f.deployment.autoPauseOf({ timeScale: 1 })).toEqual({
      secondsUntilAutoPause: 300,
      resumeMs: 15_000,
    });
    f.deployment.database.setAutoPause(
      f.deployment.autoPauseOf({ timeScale: PAUSE_SCALE, resumeMs: 15_000 * PAUSE_SCALE }),
    );
    await waitFor(() => f.deployment.database.pauseStats().state === 'paused', {
      timeoutMs: 10_000,
      message: 'the idle cluster to pause',
    });
  });

  it('a migration added while the cluster is paused deploys: Custom::Migrations Update succeeds after waiting out a 15 s resume', async () => {
    // a migration of the order service (its name says whose)
    await writeFile(
      join(migrationsDir, '9999_orders_pause_probe.sql'),
      'CREATE TABLE pause_probe (id integer PRIMARY KEY);\n',
    );
    // paused (as after 5 idle minutes); a resume takes AWS's 15 s, and the idle period is the
    // template's 300 s again, so that it does not pause twice within the deploy
    f.deployment.database.setAutoPause(
      f.deployment.autoPauseOf({ timeScale: 1, resumeMs: REAL_RESUME_MS }),
    );
    f.deployment.database.pause();
    expect(f.deployment.database.pauseStats().state).toBe('paused');
    const before = f.deployment.database.pauseStats();
    const logged = f.logs.get('migrate')?.length ?? 0;
    const updated = await f.deployment.customResource('Migrations', 'Update', {
      physicalResourceId: 'schema-migrations',
    });
    expect(updated).toMatchObject({
      status: 'SUCCESS',
      data: { ordersApplied: 1, inventoryApplied: 0 },
    });
    expect(f.deployment.database.pauseStats().resumes - before.resumes).toBe(1);
    expect(resumesMet(f, 'migrate', logged)).toBeGreaterThan(0);
    const { rows } = await f.db.db.query("SELECT to_regclass('public.pause_probe') AS t");
    expect(rows[0]).toEqual({ t: 'pause_probe' });
  }, 120_000);

  it('a day at rest (time scaled): the relay ticks every minute and sweeps hourly, maintenance runs once, the cluster pauses between them; no alarm metric (RelayRoundErrors all 0, no failed invocation), and the resumes met are counted', async () => {
    const db = f.deployment.database;
    db.setAutoPause(
      f.deployment.autoPauseOf({ timeScale: PAUSE_SCALE, resumeMs: 15_000 * PAUSE_SCALE }),
    );
    const relay = f.deployment.fn('outbox-relay');
    const maintenance = f.deployment.fn('maintenance');
    const logged = {
      relay: f.logs.get('outbox-relay')?.length ?? 0,
      maintenance: f.logs.get('maintenance')?.length ?? 0,
    };
    const errors = { relay: relay.stats.errors, maintenance: maintenance.stats.errors };
    const before = db.pauseStats();
    // the relay last looked at the outboxes an hour ago: the first tick sweeps
    const anHourAgo = Date.now() - HOUR;
    await f.deployment.setParameter(
      'RelayState',
      JSON.stringify({ lastCheckAt: anHourAgo, lastActivityAt: anHourAgo, pending: false }),
    );
    const dataApiCalls = () =>
      Object.entries(f.deployment.calls.counts())
        .filter(([k]) => k.startsWith('rds-data:'))
        .reduce((n, [, v]) => n + v, 0);
    const modes: Record<string, number> = {};
    let ticksThatCalledTheDatabase = 0;
    let maintained = false;
    const started = Date.now();
    // EventBridge's rate(1 minute) on the scaled clock: a tick that ran late delays the next one
    for (let next = started; Date.now() - started < 24 * HOUR; next += MINUTE) {
      if (next > Date.now()) await sleep(next - Date.now());
      else next = Date.now();
      const calls = dataApiCalls();
      const outcome = await relay.invoke(
        scheduledEvent({ ruleArn: 'arn:aws:events:us-east-1:000000000000:rule/RelaySchedule' }),
      );
      const mode = outcome.ok ? String((outcome.payload as { mode?: string }).mode) : 'failed';
      modes[mode] = (modes[mode] ?? 0) + 1;
      if (mode === 'tick' && dataApiCalls() > calls) ticksThatCalledTheDatabase++;
      if (!maintained && Date.now() - started >= 3.5 * HOUR) {
        // the daily run, at a moment the cluster sleeps (half an hour after the last sweep)
        await waitFor(() => db.pauseStats().state === 'paused', {
          timeoutMs: 10_000,
          message: 'the cluster to pause before maintenance',
        });
        maintained = true;
        await maintenance.invoke(
          scheduledEvent({
            ruleArn: 'arn:aws:events:us-east-1:000000000000:rule/MaintenanceSchedule',
          }),
        );
      }
    }
    const stats = db.pauseStats();
    const day = {
      modes,
      ticksThatCalledTheDatabase,
      pauses: stats.pauses - before.pauses,
      resumes: stats.resumes - before.resumes,
      relayResumes: resumesMet(f, 'outbox-relay', logged.relay),
      maintenanceResumes: resumesMet(f, 'maintenance', logged.maintenance),
    };
    const text = JSON.stringify(day);
    // hourly sweeps (slack for a loaded machine), the ticks between them, none failed
    expect(modes.sweep ?? 0, text).toBeGreaterThanOrEqual(12);
    expect(modes.tick ?? 0, text).toBeGreaterThan(modes.sweep ?? 0);
    expect(modes.failed ?? 0, text).toBe(0);
    expect(maintained).toBe(true);
    // the cluster paused between the runs that read the database, and a tick makes no Data API call
    expect(ticksThatCalledTheDatabase, text).toBe(0);
    expect(day.pauses, text).toBeGreaterThanOrEqual(12);
    expect(day.resumes, text).toBeGreaterThanOrEqual(12);
    // no alarming metric: every round of every sweep succeeded, no invocation failed (each
    // checked, so that a failing run shows them all)
    const relayMetrics = emf(f, 'outbox-relay', logged.relay);
    const roundErrors = relayMetrics.filter((m) => typeof m.RelayRoundErrors === 'number');
    expect(roundErrors.length, text).toBeGreaterThan(0);
    expect
      .soft(
        roundErrors.filter((m) => m.RelayRoundErrors !== 0).map((m) => m.RelayRoundErrors),
        `RelayRoundErrors ${text}`,
      )
      .toEqual([]);
    expect.soft(relay.stats.errors - errors.relay, `relay Errors ${text}`).toBe(0);
    expect
      .soft(maintenance.stats.errors - errors.maintenance, `maintenance Errors ${text}`)
      .toBe(0);
    // while the resumes met were counted (DatabaseResumes, with the function as its service)
    expect.soft(day.relayResumes, text).toBeGreaterThan(0);
    expect.soft(day.maintenanceResumes, text).toBeGreaterThan(0);
    expect
      .soft(relayMetrics.find((m) => typeof m.DatabaseResumes === 'number'))
      .toMatchObject({ service: 'outbox-relay' });
  }, 240_000);

  it('reserve-inventory-sqs and order-results-sqs each ride out a 15 s resume: the batch settled in its first invocation, no invocation error, no retry attempt spent', async () => {
    await consumersRideOutAResume(f, 'sqs', sources);
  }, 240_000);
});

describe('the RabbitMQ deployment with a cluster that pauses', () => {
  let f: BundleRig;
  const sources: RunningEventSource[] = [];

  beforeAll(async () => {
    f = await bundleRig('rabbitmq', 'bundles_pause_rmq', {
      autoPause: { timeScale: 1, resumeMs: REAL_RESUME_MS },
    });
    await f.pipeline.deploy();
  }, 300_000);

  afterAll(async () => {
    for (const s of sources) await s.stop().catch(() => {});
    await f?.close();
  }, 60_000);

  it('reserve-inventory-rabbitmq and order-results-rabbitmq each ride out a 15 s resume behind their Amazon MQ event sources: settled in the first invocation, no invocation error, no retry copy', async () => {
    await consumersRideOutAResume(f, 'rabbitmq', sources);
  }, 240_000);
});
