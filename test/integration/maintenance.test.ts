import type { ScheduledEvent } from 'aws-lambda';
import { Command } from 'commander';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { localLambdaContext } from '../../devkit/triggers/lambdaContext.js';
import { createMaintenanceHandler } from '../../functions/maintenance/handler.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { ConfigError, createLogger, type Retention } from '../../shared/index.js';
import {
  loadRetention,
  type MaintenanceResult,
  runMaintenance,
} from '../../shared/maintenance/retention.js';
import type { OutboxTable } from '../../shared/pipeline/constants.js';
import type { Service } from '../../shared/pipeline/schema.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

const DAY = 24 * 3600 * 1000;

/**
 * Inbox kept 3 days, published outbox rows 2 days; max age 60 s + one redrive (the default) ×
 * (parking 1 day + the default redrive window of 1 day + max age 60 s) < 3 days.
 */
const retention: Retention = { parkingMs: DAY, inboxMs: 3 * DAY, publishedOutboxMs: 2 * DAY };
const budget = TEST_RETRY_BUDGET;

/**
 * What the seed holds, by kind. The counts are chosen against a batch size of 7: the inbox needs
 * 7 + 7 + 6 (3 batches), `outbox` 7 + 7 + 2 (3 batches), `inventory_outbox` exactly 7 + 7, so
 * its third batch deletes nothing (3 batches).
 */
const BATCH = 7;
const SEED = {
  processed_messages: { old: 20, recent: 5 },
  outbox: {
    'old-published': 16,
    'old-unpublished': 3,
    'old-needs-attention': 2,
    'recent-published': 4,
  },
  inventory_outbox: {
    'old-published': 14,
    'old-unpublished': 2,
    'old-needs-attention': 1,
    'recent-published': 3,
  },
} as const;

const scheduledEvent: ScheduledEvent = {
  version: '0',
  id: '5c1c0a4e-0000-4000-8000-000000000000',
  'detail-type': 'Scheduled Event',
  source: 'aws.events',
  account: '000000000000',
  time: new Date().toISOString(),
  region: 'eu-west-1',
  resources: ['arn:aws:events:eu-west-1:000000000000:rule/maintenance'],
  detail: {},
};

describe('retention maintenance', () => {
  let t: TestDatabase;

  beforeAll(async () => {
    t = await createTestDatabase('maintenance');
  });
  afterAll(async () => {
    vi.unstubAllEnvs();
    vi.restoreAllMocks();
    await t?.drop();
  });

  async function seedInbox(kind: string, n: number, ageSql: string): Promise<void> {
    await t.db.query(
      `INSERT INTO processed_messages (consumer_name, message_id, processed_at)
       SELECT $1, gen_random_uuid(), now() - $3::interval FROM generate_series(1, $2::int)`,
      [kind, n, ageSql],
    );
  }

  /** `n` rows whose aggregate_id starts with `kind`; ages are SQL intervals, null = not set. */
  async function seedOutbox(
    table: OutboxTable,
    kind: string,
    n: number,
    ages: { occurred: string; published: string | null; needsAttention?: string },
  ): Promise<void> {
    await t.db.query(
      `INSERT INTO ${table} (id, event_type, schema_version, aggregate_type, aggregate_id,
         aggregate_version, payload, producer, correlation_id, occurred_at, published_at,
         attempts, needs_attention_at)
       SELECT gen_random_uuid(), 'order.created', '1.0', 'order', $1 || '-' || g, 1, '{}'::jsonb,
         'test', 'c-' || g, now() - $3::interval, now() - $4::interval,
         CASE WHEN $5::interval IS NULL THEN 0 ELSE 10 END, now() - $5::interval
       FROM generate_series(1, $2::int) AS g`,
      [kind, n, ages.occurred, ages.published, ages.needsAttention ?? null],
    );
  }

  async function seed(): Promise<void> {
    await t.db.query('TRUNCATE processed_messages, outbox, inventory_outbox');
    // recent inbox rows are older than the outbox retention: only inboxMs may apply to them
    await seedInbox('old', SEED.processed_messages.old, '4 days');
    await seedInbox('recent', SEED.processed_messages.recent, '2 days 12 hours');
    for (const table of ['outbox', 'inventory_outbox'] as const) {
      const s = SEED[table];
      await seedOutbox(table, 'old-published', s['old-published'], {
        occurred: '3 days 1 hour',
        published: '3 days',
      });
      // unpublished and far older than any retention: must stay
      await seedOutbox(table, 'old-unpublished', s['old-unpublished'], {
        occurred: '30 days',
        published: null,
      });
      await seedOutbox(table, 'old-needs-attention', s['old-needs-attention'], {
        occurred: '40 days',
        published: null,
        needsAttention: '39 days',
      });
      // occurred long ago, published recently: the age that counts is published_at's
      await seedOutbox(table, 'recent-published', s['recent-published'], {
        occurred: '10 days',
        published: '1 day',
      });
    }
  }

  /** Remaining rows per kind, e.g. `{ old: 20, recent: 5 }`. */
  async function remaining(table: 'processed_messages' | OutboxTable) {
    const key =
      table === 'processed_messages'
        ? 'consumer_name'
        : `regexp_replace(aggregate_id, '-[0-9]+$', '')`;
    const { rows } = await t.db.query<{ kind: string; n: number }>(
      `SELECT ${key} AS kind, count(*)::int AS n FROM ${table} GROUP BY 1`,
    );
    return Object.fromEntries(rows.map((r) => [r.kind, r.n]));
  }

  async function snapshot() {
    return {
      processed_messages: await remaining('processed_messages'),
      outbox: await remaining('outbox'),
      inventory_outbox: await remaining('inventory_outbox'),
    };
  }

  /** What remains when nothing was deleted. */
  const seeded = () => structuredClone(SEED);

  const afterRun = () => ({
    processed_messages: { recent: 5 },
    outbox: { 'old-unpublished': 3, 'old-needs-attention': 2, 'recent-published': 4 },
    inventory_outbox: { 'old-unpublished': 2, 'old-needs-attention': 1, 'recent-published': 3 },
  });

  /**
   * What one service's run trims on this file's database, which holds both services' schemas:
   * the order service's run takes every expired inbox row (both consumers'), inventory's none.
   */
  function expectServiceCounts(result: Record<Service, MaintenanceResult>): void {
    expect(result.orders.tables).toEqual({
      processed_messages: expect.objectContaining({ deleted: 20, batches: 3 }),
      outbox: expect.objectContaining({ deleted: 16, batches: 3 }),
    });
    expect(result.inventory.tables).toEqual({
      processed_messages: expect.objectContaining({ deleted: 0, batches: 1 }),
      inventory_outbox: expect.objectContaining({ deleted: 14, batches: 3 }),
    });
  }

  function expectCounts(result: MaintenanceResult): void {
    expect(result.tables.processed_messages).toMatchObject({ deleted: 20, batches: 3 });
    expect(result.tables.outbox).toMatchObject({ deleted: 16, batches: 3 });
    expect(result.tables.inventory_outbox).toMatchObject({ deleted: 14, batches: 3 });
  }

  beforeEach(seed);

  it('seeds what the assertions expect', async () => {
    expect(await snapshot()).toEqual(seeded());
  });

  it('deletes expired inbox and published outbox rows in batches, keeps the rest', async () => {
    const now = new Date();
    const result = await runMaintenance(t.db, { retention, budget, batchSize: BATCH, now });

    expect(result.dryRun).toBe(false);
    expect(result.batchSize).toBe(BATCH);
    expectCounts(result);
    expect(result.tables.processed_messages?.cutoff).toBe(
      new Date(now.getTime() - 3 * DAY).toISOString(),
    );
    expect(result.tables.outbox?.cutoff).toBe(new Date(now.getTime() - 2 * DAY).toISOString());
    expect(await snapshot()).toEqual(afterRun());

    // nothing left to do: one batch per table, deleting nothing
    const again = await runMaintenance(t.db, { retention, budget, batchSize: BATCH });
    for (const table of ['processed_messages', 'outbox', 'inventory_outbox'] as const) {
      expect(again.tables[table]).toMatchObject({ deleted: 0, batches: 1 });
    }
    expect(await snapshot()).toEqual(afterRun());
  });

  it('keeps unpublished rows whatever their age, when all else has expired', async () => {
    const later = new Date(Date.now() + 365 * DAY);
    const result = await runMaintenance(t.db, { retention, budget, batchSize: BATCH, now: later });

    expect(result.tables.processed_messages?.deleted).toBe(25);
    expect(result.tables.outbox?.deleted).toBe(20);
    expect(result.tables.inventory_outbox?.deleted).toBe(17);
    expect(await snapshot()).toEqual({
      processed_messages: {},
      outbox: { 'old-unpublished': 3, 'old-needs-attention': 2 },
      inventory_outbox: { 'old-unpublished': 2, 'old-needs-attention': 1 },
    });
  });

  it('uses the default batch size of 5000: one batch per table', async () => {
    const result = await runMaintenance(t.db, { retention, budget });
    expect(result.batchSize).toBe(5_000);
    expect(result.tables.processed_messages).toMatchObject({ deleted: 20, batches: 1 });
    expect(await snapshot()).toEqual(afterRun());
  });

  it('refuses an inbox retention that a second park-and-redrive cycle would outlive, and deletes nothing', async () => {
    // 3 days cover one cycle (60 s + 1 × (1 d + 1 d + 60 s)); a second redrive needs 4 d + 180 s
    const twice: Retention = { ...retention, redriveLimit: 2 };
    await expect(runMaintenance(t.db, { retention: twice, budget, dryRun: true })).rejects.toThrow(
      /INBOX_RETENTION_MS: \d+ must exceed .* \(60000 \+ 2 × \(86400000 \+ 86400000 \+ 60000\) = 345780000 ms\)/,
    );
    await expect(runMaintenance(t.db, { retention: twice, budget })).rejects.toThrow(ConfigError);
    expect(await snapshot()).toEqual(seeded());
    // covering both cycles, it runs
    await expect(
      runMaintenance(t.db, {
        retention: { ...twice, inboxMs: 4 * DAY + 180_001 },
        budget,
        dryRun: true,
      }),
    ).resolves.toMatchObject({ dryRun: true });
  });

  it('refuses an inbox retention ≤ max age + one cycle of parking, redrive window and max age, and deletes nothing', async () => {
    // 1 day + 60 s of max age + 1 day > 1 day: a redriven message would no longer be seen as a duplicate
    const tooShort: Retention = { ...retention, inboxMs: DAY };
    await expect(
      runMaintenance(t.db, { retention: tooShort, budget, batchSize: BATCH }),
    ).rejects.toThrow(ConfigError);
    await expect(
      runMaintenance(t.db, { retention: tooShort, budget, batchSize: BATCH, dryRun: true }),
    ).rejects.toThrow(
      /INBOX_RETENTION_MS: \d+ must exceed RETRY_MAX_AGE_MS \+ REDRIVE_LIMIT × \(PARKING_RETENTION_MS \+ REDRIVE_WINDOW_MS \+ RETRY_MAX_AGE_MS\)/,
    );
    // exactly max age + one cycle (parking + redrive window + a fresh max age) is refused too
    const exactly = {
      ...retention,
      redriveWindowMs: DAY,
      redriveLimit: 1,
      inboxMs: budget.maxAgeMs + (DAY + DAY + budget.maxAgeMs),
    };
    await expect(runMaintenance(t.db, { retention: exactly, budget })).rejects.toThrow(ConfigError);
    await expect(
      runMaintenance(t.db, {
        retention: { ...exactly, inboxMs: exactly.inboxMs + 1 },
        budget,
        dryRun: true,
      }),
    ).resolves.toMatchObject({ dryRun: true });
    expect(await snapshot()).toEqual(seeded());
  });

  it('rejects a batch size that is not a positive integer before deleting anything', async () => {
    await expect(runMaintenance(t.db, { retention, budget, batchSize: 0 })).rejects.toThrow(
      RangeError,
    );
    expect(await snapshot()).toEqual(seeded());
  });

  it('counts on a dry run and deletes nothing', async () => {
    const result = await runMaintenance(t.db, {
      retention,
      budget,
      batchSize: BATCH,
      dryRun: true,
    });
    expect(result.dryRun).toBe(true);
    expect(result.tables.processed_messages).toMatchObject({ deleted: 20, batches: 0 });
    expect(result.tables.outbox).toMatchObject({ deleted: 16, batches: 0 });
    expect(result.tables.inventory_outbox).toMatchObject({ deleted: 14, batches: 0 });
    expect(await snapshot()).toEqual(seeded());
  });

  describe('Lambda handler (daily EventBridge schedule)', () => {
    it('runs maintenance, logs and returns the counts', async () => {
      const logger = createLogger('maintenance-test');
      const info = vi.spyOn(logger, 'info');
      const handler = createMaintenanceHandler({
        dbs: { orders: t.db, inventory: t.db },
        logger,
        retention,
        budget,
        batchSize: BATCH,
      });
      const result = await handler(scheduledEvent, localLambdaContext('maintenance'));

      expectServiceCounts(result);
      expect(await snapshot()).toEqual(afterRun());
      expect(info).toHaveBeenCalledWith(
        'maintenance done',
        expect.objectContaining({
          databases: { orders: result.orders.tables, inventory: result.inventory.tables },
        }),
      );
    });

    it('fails the invocation on a too-short inbox retention and deletes nothing', async () => {
      const logger = createLogger('maintenance-test');
      const error = vi.spyOn(logger, 'error');
      const handler = createMaintenanceHandler({
        dbs: { orders: t.db, inventory: t.db },
        logger,
        retention: { ...retention, inboxMs: DAY },
        budget,
      });
      await expect(handler(scheduledEvent, localLambdaContext('maintenance'))).rejects.toThrow(
        ConfigError,
      );
      expect(error).toHaveBeenCalledWith('maintenance failed', expect.any(ConfigError));
      expect(await snapshot()).toEqual(seeded());
    });
  });

  describe('CLI: maintenance run', () => {
    /** Runs `cli maintenance run …args` in-process against this file's database. */
    async function cli(args: string[], env: Record<string, string> = {}): Promise<string> {
      // bin/commands/common.ts reads DATABASE_URL when first imported: stub it first
      vi.stubEnv('DATABASE_URL', t.url);
      vi.stubEnv('INVENTORY_DATABASE_URL', t.url);
      vi.stubEnv('INBOX_RETENTION_MS', String(retention.inboxMs));
      vi.stubEnv('PARKING_RETENTION_MS', String(retention.parkingMs));
      vi.stubEnv('PUBLISHED_OUTBOX_RETENTION_MS', String(retention.publishedOutboxMs));
      vi.stubEnv('RETRY_MAX_AGE_MS', String(budget.maxAgeMs));
      for (const [k, v] of Object.entries(env)) vi.stubEnv(k, v);
      const { registerMaintenanceCommands } = await import('../../bin/commands/maintenance.js');
      const program = new Command('cli').exitOverride();
      program.configureOutput({ writeErr: () => {}, writeOut: () => {} });
      registerMaintenanceCommands(program);
      const log = vi.spyOn(console, 'log').mockImplementation(() => {});
      try {
        await program.parseAsync(['maintenance', 'run', ...args], { from: 'user' });
        return log.mock.calls.map((c) => c.join(' ')).join('\n');
      } finally {
        log.mockRestore();
        vi.unstubAllEnvs();
      }
    }

    it('--dry-run prints what would be deleted and deletes nothing', async () => {
      const out = await cli(['--dry-run', '--json']);
      const result = JSON.parse(out) as Record<Service, MaintenanceResult>;
      expect(result.orders.dryRun).toBe(true);
      expect(result.orders.tables.processed_messages?.deleted).toBe(20);
      expect(result.orders.tables.outbox?.deleted).toBe(16);
      expect(result.inventory.tables.inventory_outbox?.deleted).toBe(14);
      expect(await snapshot()).toEqual(seeded());
    });

    it('--batch-size N deletes in batches of N and prints the counts', async () => {
      const out = await cli(['--batch-size', String(BATCH), '--json']);
      expectServiceCounts(JSON.parse(out) as Record<Service, MaintenanceResult>);
      expect(await snapshot()).toEqual(afterRun());
    });

    it('refuses a too-short inbox retention from the environment and deletes nothing', async () => {
      await expect(cli([], { INBOX_RETENTION_MS: String(DAY) })).rejects.toThrow(
        /refused: invalid configuration: INBOX_RETENTION_MS: /,
      );
      expect(await snapshot()).toEqual(seeded());
    });
  });
});

describe('loadRetention', () => {
  it('reads the three variables over the defaults', () => {
    expect(loadRetention({})).toEqual({
      parkingMs: 14 * DAY,
      inboxMs: 21 * DAY,
      publishedOutboxMs: 7 * DAY,
      redriveWindowMs: DAY,
      redriveLimit: 1,
    });
    expect(
      loadRetention({
        INBOX_RETENTION_MS: String(30 * DAY),
        PARKING_RETENTION_MS: String(DAY),
        PUBLISHED_OUTBOX_RETENTION_MS: '',
      }),
    ).toEqual({
      parkingMs: DAY,
      inboxMs: 30 * DAY,
      publishedOutboxMs: 7 * DAY,
      redriveWindowMs: DAY,
      redriveLimit: 1,
    });
  });

  it('names the variable of a bad value', () => {
    expect(() => loadRetention({ INBOX_RETENTION_MS: '3d' })).toThrow(/INBOX_RETENTION_MS/);
    expect(() => loadRetention({ PARKING_RETENTION_MS: String(30 * DAY) })).toThrow(
      /PARKING_RETENTION_MS/,
    );
    expect(() => loadRetention({ PUBLISHED_OUTBOX_RETENTION_MS: '1000' })).toThrow(
      /PUBLISHED_OUTBOX_RETENTION_MS/,
    );
  });
});
