import { costMarkdown } from '../../bench/cost.js';
import type { LabReport } from '../types.js';
import {
  detailColumns,
  type PeerView,
  type ReportModel,
  type RunView,
  reportModel,
} from './model.js';

const esc = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** The peers: versions, set-up, and how many invariants held (a failure is a finding). */
function peerLines(peers: PeerView[]): string[] {
  return [
    '',
    "Peers (a peer's failed invariant is a finding about the peer, shown as it happened):",
    '',
    '| peer | versions | invariants held | set up as | its guarantee |',
    '|---|---|---|---|---|',
    ...peers.map(
      (p) =>
        `| ${p.id} | ${esc(p.versions)} | ${p.held} of ${p.ran} | ${esc(p.setup)} | ${esc(p.guarantee)} |`,
    ),
  ];
}

const SECTION_COLUMNS = detailColumns(false);

/** What the report opens with: where the configurations differ, from the measurements. */
function differencesMarkdown({ differences: d }: ReportModel): string[] {
  return [
    ...(d.lines.length
      ? [
          '**Where the configurations differ** (measured in this run; the full table and each scenario below):',
          '',
          ...d.lines.map((l) => `- [${l.scenario}](#${l.scenario}): ${esc(l.text)}`),
          '',
        ]
      : []),
    ...(d.closing ? [d.closing, ''] : []),
  ];
}

/** The run, its versions and its verdict; the peers when they ran. */
function runLines({ run, peers }: ReportModel): string[] {
  return [
    `Run ${run.startedAt} in ${run.duration} on ${run.machine}; ${run.settings}.`,
    `Versions: ${run.versions}.`,
    `Verdict: ${run.allHeld ? 'every invariant held' : '**some invariants failed**'}${peers ? ' on our configurations' : ''}.`,
    ...(peers ? peerLines(peers) : []),
  ];
}

/** The summary table (scenarios × configurations), its legend, and the cost table. */
function summaryLines(model: ReportModel): string[] {
  const { columns, cost } = model;
  return [
    `| scenario | ${columns.map((c) => c.heading).join(' | ')} |`,
    `|---|${columns.map(() => '---').join('|')}|`,
    ...model.scenarios.map(
      (s) => `| [${s.id}](#${s.id}) | ${s.runs.map((r) => esc(r.cell)).join(' | ')} |`,
    ),
    '',
    model.legend,
    '',
    ...(cost
      ? [
          `What each deployed configuration costs (from \`npm run bench -- --suite cost\`, ${cost.measuredAt}; docs/performance.md, "Cost per million orders"):`,
          '',
          ...costMarkdown(cost.configurations),
          '',
        ]
      : []),
  ];
}

/** A run's row in its scenario's table. */
function runRow(r: RunView): string {
  if (!r.applicable) {
    const blanks = SECTION_COLUMNS.slice(2, -1).map(() => ' ');
    return `| ${r.label} | ${r.verdict} |${blanks.join('|')}| ${esc(r.reason)} |`;
  }
  const failed = r.failures.length ? ` **FAILED: ${esc(r.failures.join('; '))}**` : '';
  return `| ${[r.label, r.verdict, ...r.numbers.map(esc), `${esc(r.note)}${failed}`].join(' | ')} |`;
}

/** reports/compare.md: where the configurations differ, the summary table, then one section per scenario. */
export function renderMarkdown(report: LabReport): string {
  const model = reportModel(report);
  const out: string[] = [
    `# ${model.title}`,
    '',
    ...differencesMarkdown(model),
    ...runLines(model),
    '',
    ...summaryLines(model),
  ];
  for (const s of model.scenarios) {
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
      ...s.runs.map(runRow),
      '',
    );
  }
  return `${out.join('\n')}\n`;
}
