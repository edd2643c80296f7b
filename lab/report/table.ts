import type { ConfigurationId } from '../configurations.js';
import type { LabReport } from '../types.js';
import { CELL_LEGEND, cell, failedChecks, isPeerId, label } from './cells.js';
import { differencesText } from './differences.js';

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
  const configs = (report.scenarios[0]?.results ?? []).map((r) => r.configuration);
  const head = ['scenario', ...configs.map((c: ConfigurationId) => label(c))];
  const rows = report.scenarios.map((s) => [s.id, ...s.results.map(cell)]);
  const widths = head.map((h, i) =>
    Math.max([...h].length, ...rows.map((r) => [...(r[i] ?? '')].length)),
  );
  const line = (cols: string[]) => cols.map((c, i) => pad(c, widths[i] ?? 0)).join('  ');
  const out = [line(head), widths.map((w) => '─'.repeat(w)).join('  '), ...rows.map(line)];
  out.push('', ...wrap(CELL_LEGEND, 100), '', ...differencesText(report));
  const failed = (peer: boolean) =>
    report.scenarios.flatMap((s) =>
      s.results
        .filter((r) => !r.invariantHeld && isPeerId(r.configuration) === peer)
        .map((r) => `✗ ${s.id} × ${r.configuration}: ${failedChecks(r).join('; ')}`),
    );
  const failures = failed(false);
  if (failures.length) out.push('', ...failures);
  const findings = failed(true);
  if (findings.length) {
    out.push('', "The peers' verdicts (findings, not failures of the lab):", ...findings);
  }
  return out.join('\n');
}
