import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ConformanceReport, MessageTimeline, ScenarioResult } from './types.js';

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The row of a scenario: result and counts. */
function row(r: ScenarioResult): string[] {
  const a = r.accounting;
  if (r.status === 'n/a' || !a) {
    return [r.scenario, r.status, '', '', '', '', '', seconds(r.durationMs)];
  }
  return [
    r.scenario,
    r.status,
    `${a.accepted}/${a.events}`,
    String(a.appliedOnce),
    String(a.lost),
    String(a.duplicated),
    String(a.parked),
    seconds(r.durationMs),
  ];
}

const HEADER = ['scenario', 'result', 'accepted', 'once', 'lost', 'duplicated', 'parked', 'time'];

function summary(report: ConformanceReport): string {
  const applicable = report.results.filter((r) => r.status !== 'n/a');
  const passed = applicable.filter((r) => r.status === 'pass').length;
  const na = report.results.length - applicable.length;
  return `${report.passed ? 'PASS' : 'FAIL'}: ${passed} of ${applicable.length} applicable scenarios passed${na ? `, ${na} n/a` : ''} (consumer "${report.subject.consumer}" on ${report.transport}, ${report.events} events per scenario, ${seconds(report.durationMs)})`;
}

const factsLine = (r: ScenarioResult) =>
  Object.entries(r.facts)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');

function timelineLines(t: MessageTimeline): string[] {
  return [
    `${t.label} (${t.messageId})`,
    ...t.entries.map((e) =>
      `  +${(e.atMs / 1000).toFixed(3).padStart(7)} s  ${e.step.padEnd(15)} ${e.detail ?? ''}`.trimEnd(),
    ),
  ];
}

/** The report as the terminal shows it. */
export function renderText(report: ConformanceReport): string {
  const rows = [HEADER, ...report.results.map(row)];
  const widths = HEADER.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  const lines = [summary(report), ''];
  for (const r of rows) {
    lines.push(
      r
        .map((cell, c) => cell.padEnd(widths[c] ?? 0))
        .join('  ')
        .trimEnd(),
    );
  }
  lines.push('');
  for (const r of report.results) {
    if (r.status === 'n/a') lines.push(`${r.scenario}: n/a, ${r.reason}`);
    else if (Object.keys(r.facts).length > 0) lines.push(`${r.scenario}: ${factsLine(r)}`);
  }
  const failed = report.results.filter((r) => r.status === 'fail');
  for (const r of failed) {
    lines.push('', `${r.scenario} FAILED: expected ${r.expectation}`);
    for (const d of r.differences) lines.push(`  - ${d}`);
    for (const t of r.timelines) lines.push('', ...timelineLines(t).map((l) => `  ${l}`));
  }
  return `${lines.join('\n')}\n`;
}

const cell = (s: string) => s.replace(/\|/g, '\\|');

/** The report as Markdown (`conformance.md`). */
export function renderMarkdown(report: ConformanceReport): string {
  const lines = [
    `# Conformance: ${report.subject.consumer} on ${report.transport}`,
    '',
    summary(report),
    '',
    `| ${HEADER.join(' | ')} |`,
    `| ${HEADER.map(() => '---').join(' | ')} |`,
    ...report.results.map((r) => `| ${row(r).map(cell).join(' | ')} |`),
    '',
    '## Scenarios',
    '',
  ];
  for (const r of report.results) {
    lines.push(`- **${r.scenario}** (${r.status}): ${r.expectation}.`);
    if (r.status === 'n/a') lines.push(`  Not applicable: ${r.reason}.`);
    else if (Object.keys(r.facts).length > 0) lines.push(`  Measured: ${factsLine(r)}.`);
  }
  const failed = report.results.filter((r) => r.status === 'fail');
  if (failed.length > 0) {
    lines.push('', '## Differences from the expectations');
    for (const r of failed) {
      lines.push('', `### ${r.scenario}`, '', ...r.differences.map((d) => `- ${d}`));
      if (r.timelines.length > 0) {
        lines.push('', '```', ...r.timelines.flatMap((t) => [...timelineLines(t), '']), '```');
      }
    }
  }
  return `${lines.join('\n')}\n`;
}

/** Writes `conformance.json` and `conformance.md` into `dir` (created if missing). */
export async function writeReport(report: ConformanceReport, dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'conformance.json'), `${JSON.stringify(report, null, 2)}\n`);
  await writeFile(join(dir, 'conformance.md'), renderMarkdown(report));
}
