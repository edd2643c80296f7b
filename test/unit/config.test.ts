import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SqsTriggerConfigError, validateVisibility } from '../../devkit/triggers/sqsTrigger.js';
import { type FunctionSettings, functionEnvironment } from '../../infra/constructs/index.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { budgetOf, ENV_NAMES } from '../../shared/config/env.js';
import { parseFaults } from '../../shared/config/faults.js';
import {
  ConfigError,
  DEFAULT_REDRIVE_WINDOW_MS,
  DEFAULT_RETENTION,
  DEFAULT_RETRY_BUDGET,
  inboxRetentionRule,
  loadBudget,
  loadEnv,
  loadMigrations,
  retentionOf,
  visibilityTimeoutRule,
} from '../../shared/index.js';
import { loadRetention } from '../../shared/maintenance/retention.js';
import { SERVICE_MIGRATIONS_DIR, serviceMigrations } from '../../shared/pipeline/schema.js';

const DAY = 24 * 3600 * 1000;
const ROOT = join(import.meta.dirname, '..', '..');

/** The error `fn` throws (it must throw a ConfigError). */
function configError(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError, nothing was thrown');
}

describe('configuration: defaults', () => {
  it('an empty environment loads, with the budget and retention defaults', () => {
    const env = loadEnv({});
    expect(budgetOf(env)).toEqual({
      ladderMs: [5_000, 30_000, 300_000],
      maxAttempts: 3,
      maxAgeMs: 900_000,
      jitter: 0.1,
    });
    expect(budgetOf(env)).toEqual(DEFAULT_RETRY_BUDGET);
    expect(retentionOf(env)).toEqual({
      parkingMs: 14 * DAY,
      inboxMs: 21 * DAY,
      publishedOutboxMs: 7 * DAY,
      redriveWindowMs: DAY,
      redriveLimit: 1,
    });
    expect(retentionOf(env)).toEqual(DEFAULT_RETENTION);
    expect(env.FAULTS).toEqual(new Map());
    // unset: checked only where a function consumes an SQS queue (the deployed consumers set it)
    expect(env.SQS_VISIBILITY_TIMEOUT_S).toBe(undefined);
    expect(env.FUNCTION_TIMEOUT_MS).toBe(5_000);
    // the loaded budget is a copy: changing it leaves the defaults alone
    budgetOf(env).ladderMs.push(1);
    expect(loadEnv({}).RETRY_LADDER_MS).toEqual(DEFAULT_RETRY_BUDGET.ladderMs);
  });

  it('the defaults satisfy every cross-field rule', () => {
    const env = loadEnv({});
    // the SQS backend's local queues have a 30 s visibility timeout
    expect(visibilityTimeoutRule(30, env.FUNCTION_TIMEOUT_MS)).toBe(undefined);
    expect(
      inboxRetentionRule(
        {
          inboxMs: env.INBOX_RETENTION_MS,
          parkingMs: env.PARKING_RETENTION_MS,
          maxAgeMs: env.RETRY_MAX_AGE_MS,
          redriveWindowMs: env.REDRIVE_WINDOW_MS,
          redriveLimit: env.REDRIVE_LIMIT,
        },
        { parkingMs: 'p', maxAgeMs: 'a', redriveWindowMs: 'w', redriveLimit: 'n' },
      ),
    ).toBe(undefined);
    expect(DEFAULT_REDRIVE_WINDOW_MS).toBe(DAY);
  });

  it('empty variables count as unset', () => {
    expect(budgetOf(loadEnv({ RETRY_LADDER_MS: '', RETRY_JITTER: '' }))).toEqual(
      DEFAULT_RETRY_BUDGET,
    );
  });

  it("MIGRATIONS_DIR has no default in the library; the services' migrations are in shared/pipeline/migrations", () => {
    expect(loadEnv({}).MIGRATIONS_DIR).toBeUndefined();
    expect(SERVICE_MIGRATIONS_DIR).toBe(join(ROOT, 'shared', 'pipeline', 'migrations'));
    expect(readdirSync(SERVICE_MIGRATIONS_DIR)).toContain('0001_orders_tables.sql');
    expect(loadEnv({ MIGRATIONS_DIR: '/var/task/migrations' }).MIGRATIONS_DIR).toBe(
      '/var/task/migrations',
    );
  });
});

describe('configuration: cross-field rules fail at load, naming the variables', () => {
  it('SQS_VISIBILITY_TIMEOUT_S must be at least 6 × FUNCTION_TIMEOUT_MS', () => {
    const message = configError(() =>
      loadEnv({ SQS_VISIBILITY_TIMEOUT_S: '30', FUNCTION_TIMEOUT_MS: '6000' }),
    );
    expect(message).toMatch(
      /^invalid configuration: SQS_VISIBILITY_TIMEOUT_S: 30 s must be at least 6 × FUNCTION_TIMEOUT_MS \(6 × 6 s = 36 s\)/,
    );
    expect(() => loadEnv({ SQS_VISIBILITY_TIMEOUT_S: '35', FUNCTION_TIMEOUT_MS: '6000' })).toThrow(
      /SQS_VISIBILITY_TIMEOUT_S: 35 s/,
    );
    // exactly 6 × is enough
    expect(loadEnv({ SQS_VISIBILITY_TIMEOUT_S: '36', FUNCTION_TIMEOUT_MS: '6000' })).toMatchObject({
      SQS_VISIBILITY_TIMEOUT_S: 36,
    });
    expect(loadEnv({ SQS_VISIBILITY_TIMEOUT_S: '10', FUNCTION_TIMEOUT_MS: '1500' })).toBeDefined();
    // a function that consumes no SQS queue (the relay, 60 s) is not held to a queue it lacks
    expect(loadEnv({ FUNCTION_TIMEOUT_MS: '60000' }).FUNCTION_TIMEOUT_MS).toBe(60_000);
  });

  it('the SQS trigger emulation checks the queue attribute with the same rule', () => {
    expect(() => validateVisibility(30, 6_000)).toThrow(SqsTriggerConfigError);
    expect(() => validateVisibility(30, 6_000)).toThrow(
      `the queue's visibility timeout (30 s) ${visibilityTimeoutRule(30, 6_000)}`,
    );
    expect(() => validateVisibility(36, 6_000)).not.toThrow();
  });

  it('INBOX_RETENTION_MS must exceed RETRY_MAX_AGE_MS + REDRIVE_LIMIT × (PARKING_RETENTION_MS + REDRIVE_WINDOW_MS + RETRY_MAX_AGE_MS)', () => {
    const age = DEFAULT_RETRY_BUDGET.maxAgeMs;
    const floor = age + (DEFAULT_RETENTION.parkingMs + DAY + age);
    const message = configError(() => loadEnv({ INBOX_RETENTION_MS: String(floor) }));
    expect(message).toMatch(
      /^invalid configuration: INBOX_RETENTION_MS: \d+ must exceed RETRY_MAX_AGE_MS \+ REDRIVE_LIMIT × \(PARKING_RETENTION_MS \+ REDRIVE_WINDOW_MS \+ RETRY_MAX_AGE_MS\) \(900000 \+ 1 × \(1209600000 \+ 86400000 \+ 900000\) = 1297800000 ms\)/,
    );
    expect(retentionOf(loadEnv({ INBOX_RETENTION_MS: String(floor + 1) })).inboxMs).toBe(floor + 1);
    // each term counts: a longer parking retention, max age or redrive window breaks the defaults
    expect(() => loadEnv({ REDRIVE_WINDOW_MS: String(7 * DAY) })).toThrow(
      /INBOX_RETENTION_MS: .*REDRIVE_WINDOW_MS/,
    );
    expect(() =>
      loadEnv({ PARKING_RETENTION_MS: String(14 * DAY), REDRIVE_WINDOW_MS: String(7 * DAY - 1) }),
    ).toThrow(/INBOX_RETENTION_MS/);
    expect(() => loadEnv({ RETRY_MAX_AGE_MS: String(7 * DAY) })).toThrow(/INBOX_RETENTION_MS/);
    expect(() => loadEnv({ REDRIVE_WINDOW_MS: String(7 * DAY - 2 * age - 1) })).not.toThrow();
  });

  it('the inbox retention covers every park-and-redrive cycle allowed, each with a fresh retry window', () => {
    const age = DEFAULT_RETRY_BUDGET.maxAgeMs;
    const cycle = DEFAULT_RETENTION.parkingMs + DAY + age;
    // parking + max age + window is not enough for one redrive: the redriven message is retried
    // again for a whole max age (a fresh window) before it can be parked a second time
    expect(() => loadEnv({ INBOX_RETENTION_MS: String(14 * DAY + DAY + age + 1) })).toThrow(
      /INBOX_RETENTION_MS: /,
    );
    // a second redrive is a second cycle: 21 days no longer cover it
    expect(() => loadEnv({ REDRIVE_LIMIT: '2' })).toThrow(
      /INBOX_RETENTION_MS: \d+ must exceed .*\(900000 \+ 2 × /,
    );
    expect(() =>
      loadEnv({ REDRIVE_LIMIT: '2', INBOX_RETENTION_MS: String(age + 2 * cycle) }),
    ).toThrow(/INBOX_RETENTION_MS/);
    expect(
      retentionOf(loadEnv({ REDRIVE_LIMIT: '2', INBOX_RETENTION_MS: String(age + 2 * cycle + 1) })),
    ).toMatchObject({ redriveLimit: 2, inboxMs: age + 2 * cycle + 1 });
    // no redrive at all: the retries alone
    expect(
      retentionOf(
        loadEnv({
          REDRIVE_LIMIT: '0',
          INBOX_RETENTION_MS: String(age + 1),
          RETRY_MAX_AGE_MS: String(age),
        }),
      ).redriveLimit,
    ).toBe(0);
    expect(() => loadEnv({ REDRIVE_LIMIT: '-1' })).toThrow(/REDRIVE_LIMIT: /);
  });

  it('the wrappers apply the same rules', () => {
    expect(() => loadRetention({ INBOX_RETENTION_MS: String(14 * DAY) })).toThrow(
      /INBOX_RETENTION_MS: /,
    );
    expect(() =>
      loadBudget({ RETRY_MAX_AGE_MS: String(7 * DAY) }, DEFAULT_RETRY_BUDGET, DEFAULT_RETENTION),
    ).toThrow(/INBOX_RETENTION_MS: .*RETRY_MAX_AGE_MS/);
  });

  it('every bad variable is listed at once', () => {
    const message = configError(() =>
      loadEnv({ PORT: 'x', RETRY_JITTER: '0.9', FAULTS: 'nowhere:throw' }),
    );
    expect(message).toMatch(/PORT: /);
    expect(message).toMatch(/RETRY_JITTER: /);
    expect(message).toMatch(/FAULTS: unknown fault point "nowhere"/);
  });
});

describe('configuration: FAULTS', () => {
  it('parses point:action lists', () => {
    expect(
      loadEnv({ FAULTS: 'order.after-outbox-insert:throw, relay.after-publish : exit' }).FAULTS,
    ).toEqual(
      new Map([
        ['order.after-outbox-insert', 'throw'],
        ['relay.after-publish', 'exit'],
      ]),
    );
  });

  it('refuses an unknown point, naming it and the known ones', () => {
    const message = configError(() => loadEnv({ FAULTS: 'relay.after-pubish:throw' }));
    expect(message).toBe(
      'invalid configuration: FAULTS: unknown fault point "relay.after-pubish" (known: ' +
        'order.after-outbox-insert, relay.after-publish, reserve.after-commit, reserve.after-retry-publish)',
    );
  });

  it('refuses an unknown or missing action, naming it', () => {
    expect(configError(() => loadEnv({ FAULTS: 'relay.after-publish:crash' }))).toBe(
      'invalid configuration: FAULTS: action for relay.after-publish must be "throw" or "exit", got "crash"',
    );
    expect(configError(() => loadEnv({ FAULTS: 'reserve.after-commit' }))).toMatch(
      /FAULTS: action for reserve.after-commit must be "throw" or "exit", got ""/,
    );
  });

  it('parseFaults (what fault() arms) is the same field', () => {
    expect(parseFaults('reserve.after-commit:exit')).toEqual(
      loadEnv({ FAULTS: 'reserve.after-commit:exit' }).FAULTS,
    );
    expect(configError(() => parseFaults('x:throw'))).toMatch(/^FAULTS: unknown fault point "x"/);
  });
});

describe('configuration: budget and retention variables', () => {
  it('reads the budget variables', () => {
    const env = loadEnv({
      RETRY_LADDER_MS: '1000, 2000,3000',
      RETRY_MAX_ATTEMPTS: '5',
      RETRY_MAX_AGE_MS: '60000',
      RETRY_JITTER: '0.25',
    });
    expect(budgetOf(env)).toEqual({
      ladderMs: [1_000, 2_000, 3_000],
      maxAttempts: 5,
      maxAgeMs: 60_000,
      jitter: 0.25,
    });
  });

  it('reads the retention variables', () => {
    expect(
      retentionOf(
        loadEnv({
          INBOX_RETENTION_MS: String(3 * DAY),
          PARKING_RETENTION_MS: String(DAY),
          PUBLISHED_OUTBOX_RETENTION_MS: String(2 * DAY),
          REDRIVE_WINDOW_MS: String(DAY / 2),
        }),
      ),
    ).toEqual({
      inboxMs: 3 * DAY,
      parkingMs: DAY,
      publishedOutboxMs: 2 * DAY,
      redriveWindowMs: DAY / 2,
      redriveLimit: 1,
    });
  });

  it.each([
    [{ RETRY_LADDER_MS: '2000,1000' }, /RETRY_LADDER_MS\.1: the ladder must not decrease/],
    [{ RETRY_LADDER_MS: '1000,x' }, /RETRY_LADDER_MS\.1: /],
    [{ RETRY_LADDER_MS: ',' }, /RETRY_LADDER_MS\.0: /],
    [{ RETRY_MAX_ATTEMPTS: '-1' }, /RETRY_MAX_ATTEMPTS: /],
    [{ RETRY_MAX_AGE_MS: '999' }, /RETRY_MAX_AGE_MS: /],
    [{ RETRY_JITTER: '0.6' }, /RETRY_JITTER: /],
    [{ INBOX_RETENTION_MS: '3d' }, /INBOX_RETENTION_MS: /],
    [{ PARKING_RETENTION_MS: String(15 * DAY) }, /PARKING_RETENTION_MS: /],
    [{ PUBLISHED_OUTBOX_RETENTION_MS: '1000' }, /PUBLISHED_OUTBOX_RETENTION_MS: /],
    [{ REDRIVE_WINDOW_MS: '-1' }, /REDRIVE_WINDOW_MS: /],
  ])('%o is refused, naming the variable', (vars, expected) => {
    expect(configError(() => loadEnv(vars))).toMatch(expected);
  });

  it('loadBudget: variables over the base budget, validated with the retention it runs under', () => {
    expect(loadBudget({ RETRY_MAX_ATTEMPTS: '1' }, TEST_RETRY_BUDGET)).toEqual({
      ...TEST_RETRY_BUDGET,
      maxAttempts: 1,
    });
    expect(loadBudget({ RETRY_MAX_ATTEMPTS: '' }, TEST_RETRY_BUDGET)).toEqual(TEST_RETRY_BUDGET);
    // without a retention given, the one the environment configures
    expect(() =>
      loadBudget({ INBOX_RETENTION_MS: String(2 * DAY), PARKING_RETENTION_MS: String(DAY) }),
    ).toThrow(/INBOX_RETENTION_MS/);
    expect(
      loadBudget(
        { INBOX_RETENTION_MS: String(2 * DAY), PARKING_RETENTION_MS: String(DAY) },
        DEFAULT_RETRY_BUDGET,
        { parkingMs: DAY, inboxMs: 3 * DAY, publishedOutboxMs: DAY },
      ),
    ).toEqual(DEFAULT_RETRY_BUDGET);
  });
});

describe('configuration: MIGRATIONS_DIR', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("is read when a service's migrations are loaded, not when the module was imported", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'migrations-'));
    writeFileSync(join(dir, '0001_orders_only.sql'), 'SELECT 1;');
    vi.stubEnv('MIGRATIONS_DIR', dir);
    expect((await serviceMigrations('orders')).map((m) => m.name)).toEqual([
      '0000_rms_inbox',
      '0000_rms_outbox_outbox',
      '0001_orders_only',
    ]);
    await expect(serviceMigrations('inventory')).rejects.toThrow(
      /no migrations of the inventory service/,
    );
    vi.unstubAllEnvs();
    expect((await serviceMigrations('orders')).map((m) => m.name)).toContain('0001_orders_tables');
    expect((await loadMigrations(SERVICE_MIGRATIONS_DIR)).map((m) => m.name)).toEqual([
      '0001_inventory_tables',
      '0001_orders_tables',
      '0002_inventory_roles',
      '0002_orders_roles',
    ]);
  });
});

describe('functionEnvironment', () => {
  it('writes only variables the schema reads, and loadEnv gives the settings back', () => {
    const settings = {
      transport: 'sqs',
      dataApi: { resourceArn: 'arn:cluster', secretArn: 'arn:secret', database: 'db' },
      budget: { ladderMs: [1_000, 5_000], maxAttempts: 4, maxAgeMs: 90_000, jitter: 0.05 },
      retention: {
        parkingMs: DAY,
        inboxMs: 5 * DAY,
        publishedOutboxMs: DAY,
        redriveWindowMs: 0,
        redriveLimit: 3,
      },
      relay: { drainBudgetMs: 40_000, idleWaitMs: 50 },
      sqs: {
        sourceQueueUrl: 'https://sqs/source',
        parkingQueueUrl: 'https://sqs/parking',
        resultsQueueUrl: 'https://sqs/results',
        retryMode: 'resend',
      },
      broker: {
        secretArn: 'arn:broker-secret',
        amqpEndpoint: 'amqps://broker:5671',
        managementEndpoint: 'https://broker',
        vhost: 'v',
      },
      migrationsDir: '/var/task/migrations',
    } satisfies FunctionSettings;
    const vars = functionEnvironment(settings);
    for (const name of Object.keys(vars)) expect(ENV_NAMES).toContain(name);
    const env = loadEnv(vars);
    expect(budgetOf(env)).toEqual(settings.budget);
    expect(retentionOf(env)).toEqual(settings.retention);
    expect(env).toMatchObject({
      TRANSPORT: 'sqs',
      DB_DRIVER: 'data-api',
      DATA_API_RESOURCE_ARN: 'arn:cluster',
      DATA_API_SECRET_ARN: 'arn:secret',
      DATA_API_DATABASE: 'db',
      RELAY_DRAIN_BUDGET_MS: 40_000,
      RELAY_IDLE_WAIT_MS: 50,
      SOURCE_QUEUE_URL: 'https://sqs/source',
      PARKING_QUEUE_URL: 'https://sqs/parking',
      RESULTS_QUEUE_URL: 'https://sqs/results',
      SQS_RETRY_MODE: 'resend',
      BROKER_SECRET_ARN: 'arn:broker-secret',
      BROKER_AMQP_ENDPOINT: 'amqps://broker:5671',
      BROKER_MANAGEMENT_ENDPOINT: 'https://broker',
      BROKER_VHOST: 'v',
      MIGRATIONS_DIR: '/var/task/migrations',
    });
    expect(functionEnvironment({})).toEqual({});
  });
});
