import { describe, expect, it } from 'vitest';
import { NO_ACCOUNTING } from '../../lab/accounting.js';
import type { ConfigurationId } from '../../lab/configurations.js';
import { cell } from '../../lab/report/cells.js';
import { agreedText, differences, scenarioDifference } from '../../lab/report/differences.js';
import { renderHtml } from '../../lab/report/html.js';
import { renderMarkdown } from '../../lab/report/markdown.js';
import { renderTable } from '../../lab/report/table.js';
import type { LabReport, RunResult, ScenarioReport } from '../../lab/types.js';

const run = (
  configuration: ConfigurationId,
  over: Partial<RunResult> = {},
  accounting: Partial<RunResult['accounting']> = {},
): RunResult => ({
  configuration,
  applicable: true,
  invariantHeld: true,
  deliveries: 1,
  effects: 1,
  parked: 0,
  retries: 0,
  timeToFinalMs: 100,
  note: 'note',
  duplicatesAbsorbed: 0,
  retryDelaysMs: [],
  redeliveries: 0,
  failedInvocations: 0,
  parkedMessages: [],
  accounting: { ...NO_ACCOUNTING, accepted: 1, decided: 1, ...accounting },
  checks: [],
  timeline: [],
  wallMs: 1_000,
  ...over,
});

const scenario = (id: string, results: RunResult[]): ScenarioReport => ({
  id,
  title: id,
  stimulus: 'does',
  invariant: 'holds',
  results,
});

const OURS: ConfigurationId[] = [
  'rabbitmq-worker',
  'rabbitmq-amazonmq',
  'sqs-visibility',
  'sqs-resend',
];

const same = (id: string) =>
  scenario(
    id,
    OURS.map((c) => run(c)),
  );

const report = (scenarios: ScenarioReport[]): LabReport => ({
  startedAt: '2026-11-29T00:00:00.000Z',
  durationMs: 60_000,
  settings: 'scaled',
  code: 'sources',
  machine: '2 × cpu',
  versions: {},
  allHeld: true,
  scenarios,
});

describe('Lab report: the differences it opens with', () => {
  it('a line for 0.1 s against 3.1 s, the configurations grouped by their time', () => {
    const s = scenario('crash-after-commit', [
      run('rabbitmq-worker', { timeToFinalMs: 100 }),
      run('rabbitmq-amazonmq', { timeToFinalMs: 140 }),
      run('sqs-visibility', { timeToFinalMs: 3_100 }),
      run('sqs-resend', { timeToFinalMs: 3_120 }),
    ]);
    expect(scenarioDifference(s)).toBe(
      'final after 0.1 s on RabbitMQ worker and Amazon MQ trigger; 3.1 s on SQS visibility and SQS resend',
    );
  });

  it('no line where every configuration agrees; they are counted', () => {
    const d = differences(
      report([
        same('happy-path'),
        scenario('crash-after-commit', [
          run('rabbitmq-worker', { timeToFinalMs: 100 }),
          run('sqs-visibility', { timeToFinalMs: 3_100 }),
        ]),
        same('duplicate-publish'),
      ]),
    );
    expect(d.lines.map((l) => l.scenario)).toEqual(['crash-after-commit']);
    expect(d.agreed).toBe(2);
    expect(agreedText(d)).toBe('2 other scenarios: the same result everywhere.');
    expect(agreedText(differences(report([same('a'), same('b')])))).toBe(
      'All 2 scenarios: the same result everywhere.',
    );
  });

  it('times alike are not a difference: under 2× or under 1 s apart', () => {
    const times = (a: number, b: number) =>
      scenario('t', [
        run('rabbitmq-worker', { timeToFinalMs: a }),
        run('sqs-visibility', { timeToFinalMs: b }),
      ]);
    expect(scenarioDifference(times(100, 400))).toBeUndefined(); // 4×, but 0.3 s
    expect(scenarioDifference(times(500, 1_000))).toBeUndefined(); // 2×, but 0.5 s (noise here)
    expect(scenarioDifference(times(1_000, 1_900))).toBeUndefined(); // 0.9 s, but < 2×
    expect(scenarioDifference(times(1_000, 2_000))).toBe(
      'final after 1.0 s on RabbitMQ worker; 2.0 s on SQS visibility',
    );
  });

  it('parked after a different number of retries', () => {
    const s = scenario('db-outage-long', [
      run('rabbitmq-worker', { parked: 1, retries: 2, effects: 0 }),
      run('sqs-visibility', { parked: 1, retries: 4, effects: 0 }),
      run('sqs-resend', { parked: 1, retries: 4, effects: 0 }),
    ]);
    expect(scenarioDifference(s)).toBe(
      'parked after 2 retries on RabbitMQ worker; after 4 on SQS visibility and SQS resend',
    );
  });

  it('a failed peer: ✗ with its anomalies, not repeated as a count', () => {
    const s = scenario('crash-after-commit', [
      run('rabbitmq-worker'),
      run('sqs-visibility'),
      run('peer-powertools', { invariantHeld: false, effects: 2 }, { duplicated: 1 }),
    ]);
    expect(scenarioDifference(s)).toBe(
      '✗ on peer Powertools: 1 applied twice — 1 effect on RabbitMQ worker and SQS visibility; 2 on peer Powertools',
    );
  });

  it('an anomaly where the invariant held is a difference of its own', () => {
    const s = scenario('relay-crash', [
      run('rabbitmq-worker', {}, { lost: 1 }),
      run('sqs-visibility'),
    ]);
    expect(scenarioDifference(s)).toBe('1 lost on RabbitMQ worker; none lost on SQS visibility');
  });

  it('robust to n/a and failed runs: n/a left out, a failed set-up only as its ✗', () => {
    const s = scenario('poison', [
      run('rabbitmq-worker', { retries: 3 }),
      run('sqs-visibility', { retries: 3 }),
      run('sqs-fifo', { applicable: false, reason: 'not about order', instead: 'like visibility' }),
      run('sqs-resend', {
        invariantHeld: false,
        effects: 0,
        retries: 0,
        timeToFinalMs: null,
        note: 'setup failed',
        error: 'setup: connection refused',
        accounting: NO_ACCOUNTING,
      }),
    ]);
    expect(scenarioDifference(s)).toBe('✗ on SQS resend: setup: connection refused');
    const onlyNa = scenario('x', [
      run('sqs-fifo', { applicable: false, reason: 'r', instead: 'i' }),
    ]);
    const d = differences(report([onlyNa, same('happy-path')]));
    expect(d).toMatchObject({ lines: [], agreed: 1, notApplicable: 1 });
    expect(agreedText(d)).toBe(
      'The one scenario: the same result everywhere; 1 scenario applied to none of the configurations run.',
    );
  });

  it('compare.md and compare.html open with it; the terminal prints it', () => {
    const r = report([
      same('happy-path'),
      scenario('crash-after-commit', [
        run('rabbitmq-worker', { timeToFinalMs: 100 }),
        run('sqs-visibility', { timeToFinalMs: 3_100 }),
      ]),
    ]);
    const md = renderMarkdown(r);
    const line =
      '- [crash-after-commit](#crash-after-commit): final after 0.1 s on RabbitMQ worker; 3.1 s on SQS visibility';
    expect(md).toContain(line);
    expect(md.indexOf(line)).toBeLessThan(md.indexOf('| scenario |'));
    expect(md).toContain('1 other scenario: the same result everywhere.');
    const html = renderHtml(r);
    expect(html.indexOf('Where the configurations differ')).toBeLessThan(
      html.indexOf('<table class="summary">'),
    );
    expect(html).toContain(
      '<a href="#crash-after-commit">crash-after-commit</a>: final after 0.1 s',
    );
    expect(renderTable(r)).toContain(
      [
        'Where the configurations differ:',
        '  crash-after-commit: final after 0.1 s on RabbitMQ worker; 3.1 s on SQS visibility',
        '1 other scenario: the same result everywhere.',
      ].join('\n'),
    );
  });
});

describe('Lab report: cells a newcomer can read', () => {
  it('effects, lost and time always; the rest only when not zero', () => {
    expect(cell(run('rabbitmq-worker', { timeToFinalMs: 1_234 }))).toBe(
      '✓ 1 effect · 0 lost · 1.2 s',
    );
    expect(
      cell(
        run(
          'sqs-visibility',
          {
            invariantHeld: false,
            effects: 3,
            duplicatesAbsorbed: 1,
            retries: 2,
            parked: 1,
            timeToFinalMs: 12_400,
          },
          { lost: 1, duplicated: 2, unexpected: 1, orderViolations: 1, recovered: 3 },
        ),
      ),
    ).toBe(
      '✗ 3 effects · 1 dup absorbed · 2 retries · 1 parked · 1 lost · 2 applied twice · 1 unexpected · 1 out of order · 3 recovered · 12 s',
    );
  });

  it('n/a, and "not reproducible here" where the emulator cannot reproduce it', () => {
    expect(cell(run('sqs-fifo', { applicable: false, reason: 'not about order' }))).toBe('n/a');
    const emulator = run('sqs-visibility', {
      applicable: false,
      reason: 'emulator: fauxqs does not expire a lease mid-batch',
      instead: 'on AWS the record comes back',
    });
    expect(cell(emulator)).toBe('not reproducible here');
    const md = renderMarkdown(report([scenario('s', [run('rabbitmq-worker'), emulator])]));
    expect(md).toContain('| not reproducible here |');
    expect(md).toContain(
      'fauxqs does not expire a lease mid-batch. Instead: on AWS the record comes back',
    );
    expect(md).not.toContain('emulator: fauxqs');
  });

  it('a run that could not be set up says so', () => {
    expect(
      cell(
        run('sqs-resend', {
          invariantHeld: false,
          note: 'setup failed',
          error: 'setup: connection refused',
        }),
      ),
    ).toBe('✗ setup failed');
  });
});
