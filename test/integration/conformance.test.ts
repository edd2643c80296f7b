import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  type ConformanceReport,
  type ConformanceServices,
  runConformance,
  SCENARIO_NAMES,
} from '../../shared/testing/index.js';

/**
 * The conformance kit on the real services, through the package's testing entry point: a good
 * subject (an `inboxHandler` writing its effect in the transaction) passes every scenario on every
 * transport; the same subject writing its effect outside the transaction is caught; the example's
 * own reserve handler passes; and the command line exits by the result and writes its report.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const FIXTURES = join(ROOT, 'test', 'fixtures', 'conformance');
const SHIPPING = join(FIXTURES, 'shipping.subject.ts');
const BROKEN = join(FIXTURES, 'broken.subject.ts');
const RESERVE = join(FIXTURES, 'reserve.subject.ts');

const services = inject('services');
const SERVICES: ConformanceServices = {
  databaseUrl: services.databaseUrl,
  amqpUrl: services.amqpUrl,
  managementUrl: services.managementUrl,
  sqsEndpoint: services.sqs[0]?.endpoint,
  natsUrl: process.env.NATS_URL,
};

/** Few events, so that each transport's scenarios take seconds. */
const EVENTS = 4;
const TIMEOUT = 180_000;

/** Each scenario's result, `n/a` with its reason. */
const results = (report: ConformanceReport) =>
  Object.fromEntries(
    report.results.map((r) => [r.scenario, r.status === 'n/a' ? `n/a: ${r.reason}` : r.status]),
  );

/** What failed, with its differences (empty when everything passed). */
const failures = (report: ConformanceReport) =>
  report.results
    .filter((r) => r.status === 'fail')
    .map((r) => `${r.scenario}: ${r.differences.join('; ')}`);

/** Whether a second process reaches the broker; whether a delivery has a lease of its own. */
const TRANSPORTS = [
  { name: 'memory', shared: false, deliveryLease: false },
  { name: 'rabbitmq', shared: true, deliveryLease: false },
  { name: 'sqs', shared: true, deliveryLease: true },
  { name: 'nats-jetstream', shared: true, deliveryLease: true },
];

describe.each(TRANSPORTS)('the conformance kit on $name', { concurrent: true }, (t) => {
  it(
    'passes a good subject on every scenario (the process scenarios n/a only where no second process reaches the broker, the slow one where no delivery has a lease)',
    async () => {
      const report = await runConformance({
        subject: SHIPPING,
        transport: t.name,
        services: SERVICES,
        events: EVENTS,
      });
      expect(failures(report)).toEqual([]);
      expect(report.passed).toBe(true);
      const statuses = results(report);
      expect(Object.keys(statuses)).toEqual([...SCENARIO_NAMES]);
      for (const name of SCENARIO_NAMES) {
        if ((name === 'killed-process' || name === 'frozen-process') && !t.shared) {
          expect(statuses[name]).toMatch(/^n\/a: the in-memory broker lives inside one process/);
        } else if (name === 'slow-past-lease' && !t.deliveryLease) {
          expect(statuses[name]).toMatch(/^n\/a: /);
        } else {
          expect(statuses[name], name).toBe('pass');
        }
      }
      for (const r of report.results.filter((x) => x.status === 'pass')) {
        expect(r.accounting, r.scenario).toMatchObject({
          events: EVENTS,
          accepted: EVENTS,
          appliedOnce: EVENTS,
          lost: 0,
          duplicated: 0,
          parked: 0,
          unexpected: 0,
        });
      }
      const facts = (name: string) => report.results.find((r) => r.scenario === name)?.facts;
      // the faults reached the handler: it failed and the broker delivered again
      expect(facts('ack-lost')?.retries).toBeGreaterThan(0);
      expect(facts('rollback-after-effect')?.retries).toBeGreaterThan(0);
      expect(facts('poison')?.poisonParkedWithDiagnosis).toBe(2);
      expect(facts('db-outage-long')).toMatchObject({ parkedExhausted: EVENTS, redriven: EVENTS });
      expect(facts('redelivery-storm')?.fewestDeliveries).toBeGreaterThanOrEqual(4);
      if (t.shared) {
        // the second process took over what the frozen one held, and its stale ack did no harm
        expect(facts('frozen-process')?.takenOverBySecond).toBeGreaterThan(0);
      }
      if (t.deliveryLease) {
        // both consumers held a slowed message at once
        expect(facts('slow-past-lease')?.deliveredAgainWhileHeld).toBeGreaterThan(0);
      }
    },
    TIMEOUT,
  );

  it(
    'catches a subject that writes its effect outside the transaction: rollback-after-effect applies it twice',
    async () => {
      const report = await runConformance({
        subject: BROKEN,
        transport: t.name,
        services: SERVICES,
        events: EVENTS,
        scenarios: ['rollback-after-effect'],
      });
      expect(report.passed).toBe(false);
      const [result] = report.results;
      expect(result).toMatchObject({ scenario: 'rollback-after-effect', status: 'fail' });
      expect(result?.accounting?.duplicated).toBeGreaterThan(0);
      expect(result?.accounting?.lost).toBe(0);
      expect(result?.differences.join('\n')).toMatch(
        /applied more than once: their effect outlived/,
      );
      // the timelines show each event's deliveries and its effects
      const timeline = result?.timelines[0];
      expect(timeline?.entries.map((e) => e.step)).toEqual(
        expect.arrayContaining(['published', 'delivered', 'fault', 'outcome', 'acked', 'effects']),
      );
      expect(timeline?.entries.at(-1)?.detail).toMatch(/^[2-9] in the database/);
    },
    TIMEOUT,
  );
});

describe.each(['memory', 'rabbitmq'])(
  "the example's reserve handler through the kit on %s",
  { concurrent: true },
  (transport) => {
    it(
      'passes every applicable scenario',
      async () => {
        const report = await runConformance({
          subject: RESERVE,
          transport,
          services: SERVICES,
          events: EVENTS,
        });
        expect(failures(report)).toEqual([]);
        expect(report.results.filter((r) => r.status === 'pass').length).toBeGreaterThanOrEqual(8);
      },
      TIMEOUT,
    );
  },
);

describe('the command line (memory transport)', () => {
  const run = promisify(execFile);
  let out: string;
  beforeAll(async () => {
    out = await mkdtemp(join(tmpdir(), 'rms-conformance-'));
  });
  afterAll(async () => {
    if (out) await rm(out, { recursive: true, force: true });
  });

  /** `npm run conformance -- …`, as a child process: its exit code and output. */
  async function cli(args: string[]): Promise<{ code: number; output: string }> {
    try {
      const { stdout, stderr } = await run(
        process.execPath,
        ['--import', 'tsx', 'shared/testing/conformance/cli.ts', 'conformance', ...args],
        { cwd: ROOT, env: { ...process.env, DATABASE_URL: services.databaseUrl } },
      );
      return { code: 0, output: stdout + stderr };
    } catch (err) {
      const e = err as { code?: number; stdout?: string; stderr?: string };
      return { code: e.code ?? -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
    }
  }

  it(
    'exits 0 on a good subject and writes conformance.json and conformance.md under --out',
    async () => {
      const dir = join(out, 'good');
      const ran = await cli([
        '--handler',
        SHIPPING,
        '--transport',
        'memory',
        '--scenario',
        'duplicates,poison,killed-process',
        '--events',
        '3',
        '--out',
        dir,
      ]);
      expect(ran.code, ran.output).toBe(0);
      expect(ran.output).toMatch(/^PASS: 2 of 2 applicable scenarios passed, 1 n\/a/m);
      const report = JSON.parse(await readFile(join(dir, 'conformance.json'), 'utf8'));
      expect(report).toMatchObject({ transport: 'memory', passed: true, events: 3 });
      expect(report.results.map((r: { scenario: string }) => r.scenario)).toEqual([
        'duplicates',
        'poison',
        'killed-process',
      ]);
      const md = await readFile(join(dir, 'conformance.md'), 'utf8');
      expect(md).toMatch(/^# Conformance: shipping on memory/);
      expect(md).toMatch(/\| duplicates \| pass \| 3\/3 \| 3 \| 0 \| 0 \| 0 \|/);
    },
    TIMEOUT,
  );

  it(
    'exits 1 on the broken subject, with its differences and timelines in the report',
    async () => {
      const dir = join(out, 'broken');
      const ran = await cli([
        '--handler',
        BROKEN,
        '--transport',
        'memory',
        '--scenario',
        'rollback-after-effect',
        '--events',
        '3',
        '--out',
        dir,
      ]);
      expect(ran.code, ran.output).toBe(1);
      expect(ran.output).toMatch(/rollback-after-effect FAILED/);
      const md = await readFile(join(dir, 'conformance.md'), 'utf8');
      expect(md).toMatch(/## Differences from the expectations/);
      expect(md).toMatch(/applied more than once/);
    },
    TIMEOUT,
  );

  it('exits 1 with one line when the handler module cannot be imported', async () => {
    const ran = await cli(['--handler', join(FIXTURES, 'missing.ts'), '--transport', 'memory']);
    expect(ran.code).toBe(1);
    expect(ran.output).toMatch(/^conformance: cannot import .*missing\.ts/m);
  });
});
