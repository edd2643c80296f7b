import { costMarkdown } from '../../bench/cost.js';
import type { LabReport } from '../types.js';
import {
  CELL_LEGEND,
  cell,
  columnLabel,
  detailCells,
  failedChecks,
  label,
  notApplicableText,
  reasonText,
  seconds,
  verdict,
} from './cells.js';
import { agreedText, differences } from './differences.js';

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

const SECTION_COLUMNS = [
  'configuration',
  'verdict',
  'deliveries',
  'effects',
  'duplicates absorbed',
  'retries',
  'parked',
  'lost (of accepted)',
  'applied twice',
  'recovered',
  'unexpected',
  'order violations',
  'time to final',
  'time to recover',
  'mechanism',
];

/** What the report opens with: where the configurations differ, from the measurements. */
function differencesMarkdown(report: LabReport): string[] {
  const d = differences(report);
  const closing = agreedText(d);
  return [
    ...(d.lines.length
      ? [
          '**Where the configurations differ** (measured in this run; the full table and each scenario below):',
          '',
          ...d.lines.map((l) => `- [${l.scenario}](#${l.scenario}): ${esc(l.text)}`),
          '',
        ]
      : []),
    ...(closing ? [closing, ''] : []),
  ];
}

/** reports/compare.md: where the configurations differ, the summary table, then one section per scenario. */
export function renderMarkdown(report: LabReport): string {
  const configs = (report.scenarios[0]?.results ?? []).map((r) => r.configuration);
  const out: string[] = [
    '# Comparison lab: the same faults on RabbitMQ and SQS',
    '',
    ...differencesMarkdown(report),
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
    CELL_LEGEND,
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
      `| ${SECTION_COLUMNS.join(' | ')} |`,
      `|${SECTION_COLUMNS.map(() => '---').join('|')}|`,
    );
    for (const r of s.results) {
      if (!r.applicable) {
        const blanks = SECTION_COLUMNS.slice(2, -1).map(() => ' ');
        out.push(
          `| ${label(r.configuration)} | ${notApplicableText(r)} |${blanks.join('|')}| ${esc(reasonText(r))} |`,
        );
        continue;
      }
      const failures = failedChecks(r);
      out.push(
        `| ${[
          label(r.configuration),
          verdict(r),
          ...detailCells(r, esc),
          `${esc(r.note)}${failures.length ? ` **FAILED: ${esc(failures.join('; '))}**` : ''}`,
        ].join(' | ')} |`,
      );
    }
    out.push('');
  }
  return `${out.join('\n')}\n`;
}
