import { costMarkdown } from '../../bench/cost.js';
import type { LabReport } from '../types.js';
import {
  CELL_LEGEND,
  cell,
  columnLabel,
  failedChecks,
  label,
  parkedText,
  retriesText,
  seconds,
  verdict,
} from './cells.js';

const esc = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** The peers: versions, set-up, and how many invariants held (a failure is a finding). */
function peerLines(report: LabReport): string[] {
  return [
    '',
    "Peers (a peer's failed invariant is a finding about the peer, shown as it happened):",
    '',
    '| peer | versions | invariants held | set up as | its guarantee |',
    '|---|---|---|---|---|',
    ...(report.peers ?? []).map(
      (p) =>
        `| ${p.id} | ${esc(
          Object.entries(p.versions)
            .map(([k, v]) => `${k} ${v}`)
            .join(', '),
        )} | ${p.held} of ${p.ran} | ${esc(p.setup)} | ${esc(p.guarantee)} |`,
    ),
  ];
}

/** reports/compare.md: the summary table, then one section per scenario. */
export function renderMarkdown(report: LabReport): string {
  const configs = (report.scenarios[0]?.results ?? []).map((r) => r.configuration);
  const out: string[] = [
    '# Comparison lab: the same faults on RabbitMQ and SQS',
    '',
    `Run ${report.startedAt} in ${seconds(report.durationMs)} on ${report.machine}; ${report.settings}.`,
    `Versions: ${Object.entries(report.versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}.`,
    `Verdict: ${report.allHeld ? 'every invariant held' : '**some invariants failed**'}${report.peers ? ' on our configurations' : ''}.`,
    ...(report.peers ? peerLines(report) : []),
    '',
    `| scenario | ${configs.map((c) => columnLabel(c, report.versions)).join(' | ')} |`,
    `|---|${configs.map(() => '---').join('|')}|`,
    ...report.scenarios.map(
      (s) => `| [${s.id}](#${s.id}) | ${s.results.map((r) => esc(cell(r))).join(' | ')} |`,
    ),
    '',
    `${CELL_LEGEND}; n/a = not applicable (the scenario's section says why).`,
    '',
    ...(report.cost
      ? [
          `What each deployed configuration costs (from \`npm run bench -- --suite cost\`, ${report.cost.measuredAt}; docs/performance.md, "Cost per million orders"):`,
          '',
          ...costMarkdown(report.cost.configurations),
          '',
        ]
      : []),
  ];
  for (const s of report.scenarios) {
    out.push(
      `<a id="${s.id}"></a>`,
      `## ${s.title}`,
      '',
      `**Does:** ${s.stimulus}`,
      '',
      `**Invariant:** ${s.invariant}`,
      '',
      '| configuration | verdict | deliveries | effects | duplicates absorbed | retries | parked | time to final | mechanism |',
      '|---|---|---|---|---|---|---|---|---|',
    );
    for (const r of s.results) {
      if (!r.applicable) {
        out.push(
          `| ${label(r.configuration)} | n/a | | | | | | | ${esc(`${r.reason}. Instead: ${r.instead}`)} |`,
        );
        continue;
      }
      const failures = failedChecks(r);
      out.push(
        `| ${label(r.configuration)} | ${verdict(r)} | ${r.deliveries} | ${r.effects} | ${r.duplicatesAbsorbed} | ${esc(retriesText(r))} | ${esc(parkedText(r))} | ${seconds(r.timeToFinalMs)} | ${esc(r.note)}${failures.length ? ` **FAILED: ${esc(failures.join('; '))}**` : ''} |`,
      );
    }
    out.push('');
  }
  return `${out.join('\n')}\n`;
}
