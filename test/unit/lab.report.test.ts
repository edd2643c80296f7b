import { describe, expect, it } from 'vitest';
import { renderHtml } from '../../lab/report/html.js';
import { renderMarkdown } from '../../lab/report/markdown.js';
import { renderTable } from '../../lab/report/table.js';
import type { LabReport, RunResult, TimelineEvent } from '../../lab/types.js';

const base: RunResult = {
  configuration: 'rabbitmq-worker',
  applicable: true,
  invariantHeld: true,
  deliveries: 3,
  effects: 1,
  parked: 0,
  retries: 1,
  timeToFinalMs: 1_234,
  note: 'a <note> & more',
  duplicatesAbsorbed: 1,
  retryDelaysMs: [1_003],
  redeliveries: 1,
  failedInvocations: 0,
  parkedMessages: [],
  accounting: {
    accepted: 1,
    decided: 1,
    lost: 0,
    duplicated: 0,
    recovered: 0,
    unexpected: 0,
    orderViolations: 0,
    recoverMs: null,
  },
  checks: [{ ok: true, text: 'one reservation' }],
  timeline: [
    { t: 0, kind: 'received', label: 'received a', messageId: 'aaaaaaaa-1' },
    { t: 10, kind: 'retry', label: 'retry a', messageId: 'aaaaaaaa-1' },
    { t: 1_013, kind: 'received', label: 'received a', messageId: 'aaaaaaaa-1' },
    { t: 1_020, kind: 'committed', label: 'committed a', messageId: 'aaaaaaaa-1' },
    { t: 1_234, kind: 'final', label: 'final state' },
  ],
  wallMs: 2_000,
};

const report: LabReport = {
  startedAt: '2026-11-29T00:00:00.000Z',
  durationMs: 60_000,
  settings: 'scaled',
  code: 'sources',
  machine: '2 × cpu',
  versions: { rabbitmq: '3.10.8' },
  allHeld: false,
  scenarios: [
    {
      id: 'demo',
      title: 'Demo scenario',
      stimulus: 'does things',
      invariant: 'holds',
      results: [
        base,
        {
          ...base,
          configuration: 'sqs-visibility',
          invariantHeld: false,
          checks: [{ ok: false, text: 'two reservations' }],
        },
        {
          ...base,
          configuration: 'sqs-fifo',
          applicable: false,
          reason: 'not about order',
          instead: 'like visibility',
          timeline: [],
        },
      ],
    },
  ],
};

describe('Lab reports', () => {
  it('the terminal table has one row per scenario and lists failed checks', () => {
    const table = renderTable(report);
    expect(table).toContain('✓ 1 effect · 1 dup absorbed · 1 retry · 0 lost · 1.2 s');
    expect(table).toContain('n/a');
    expect(table).toContain('✗ demo × sqs-visibility: two reservations');
  });

  it('markdown carries the summary and a section per scenario with reasons for n/a', () => {
    const md = renderMarkdown(report);
    expect(md).toContain('| [demo](#demo) |');
    expect(md).toContain('| scenario | RabbitMQ worker (RabbitMQ 3.10.8) | SQS visibility |');
    expect(md).toContain('1 (after 1.0 s)');
    expect(md).toContain('not about order. Instead: like visibility');
    expect(md).toContain('| lost (of accepted) | applied twice | recovered | unexpected |');
    expect(md).toContain('| 0 of 1 |');
  });

  it('the HTML page is self-contained, escapes text and draws a lane per configuration', () => {
    const html = renderHtml(report);
    expect(html).not.toMatch(/<(script|link)\b|src=/);
    expect(html).toContain('a &lt;note&gt; &amp; more');
    expect(html.match(/<svg /g)?.length).toBe(2); // legend + one timeline
    expect(html).toContain('not applicable: not about order');
    expect(html).toContain('>1.0 s<'); // the measured retry delay on its arc
  });

  it('the HTML page draws a timeline of 200,000 events (a long run: no spread into Math.max)', () => {
    // 50,000 messages, each delivered, retried after 1 s, delivered again and committed
    const timeline: TimelineEvent[] = [];
    for (let m = 0; m < 50_000; m++) {
      const messageId = `m-${m}`;
      const t = m * 40;
      timeline.push(
        { t, kind: 'received', label: 'received', messageId, attempt: 0 },
        { t: t + 1, kind: 'retry', label: 'retry', messageId, attempt: 0 },
        { t: t + 1_001, kind: 'received', label: 'received', messageId, attempt: 1 },
        { t: t + 1_002, kind: 'committed', label: 'committed', messageId },
      );
    }
    const long: LabReport = {
      ...report,
      scenarios: [
        {
          ...(report.scenarios[0] as LabReport['scenarios'][number]),
          results: [{ ...base, timeline }],
        },
      ],
    };
    const html = renderHtml(long);
    expect(html.match(/class="delay"/g)?.length).toBe(50_000); // every retry's arc
    expect(html).toContain('>1 s<'); // the delay on an arc
    // the axis spans the last event (2,000 s): its ticks go every 300 s up to 1800 s
    expect(html).toContain('>1800 s<');
  }, 60_000);
});
