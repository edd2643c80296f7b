import type { LabReport } from '../types.js';
import { type ReportModel, reportModel } from './model.js';

const pad = (s: string, n: number) => s + ' '.repeat(Math.max(0, n - [...s].length));

/** Words into lines of at most `width` characters (a longer word stays whole). */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}

/** The comparison table for a terminal: scenarios × configurations. */
export function renderTable(report: LabReport): string {
  const model = reportModel(report);
  const head = ['scenario', ...model.columns.map((c) => c.label)];
  const rows = model.scenarios.map((s) => [s.id, ...s.runs.map((r) => r.cell)]);
  const widths = head.map((h, i) =>
    Math.max([...h].length, ...rows.map((r) => [...(r[i] ?? '')].length)),
  );
  const line = (cols: string[]) => cols.map((c, i) => pad(c, widths[i] ?? 0)).join('  ');
  const out = [line(head), widths.map((w) => '─'.repeat(w)).join('  '), ...rows.map(line)];
  out.push('', ...wrap(model.legend, 100), '', ...differencesLines(model));
  const failures = failedRuns(model, false);
  if (failures.length) out.push('', ...failures);
  const findings = failedRuns(model, true);
  if (findings.length) {
    out.push('', "The peers' verdicts (findings, not failures of the lab):", ...findings);
  }
  return out.join('\n');
}

/** Where the configurations differ, as plain lines. */
function differencesLines({ differences: d }: ReportModel): string[] {
  return [
    ...(d.lines.length ? ['Where the configurations differ:'] : []),
    ...d.lines.map((l) => `  ${l.scenario}: ${l.text}`),
    ...(d.closing ? [d.closing] : []),
  ];
}

/** `✗ scenario × configuration: why`, for our configurations' runs or the peers'. */
function failedRuns(model: ReportModel, peers: boolean): string[] {
  return model.scenarios.flatMap((s) =>
    s.runs
      .filter((r) => !r.invariantHeld && r.peer === peers)
      .map((r) => `✗ ${s.id} × ${r.configuration}: ${r.failures.join('; ')}`),
  );
}
