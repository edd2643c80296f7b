import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { type AtRestMonth, atRestMarkdown } from './atRest.js';
import { type ConfigurationCost, costMarkdown } from './cost.js';
import type { PeerRow } from './peers.js';

/**
 * A goal: a bare number is a minimum ratio (value/baseline ≥ goal, the throughput figures);
 * an object bounds the value or the ratio.
 */
export type Goal = number | { on: 'value' | 'ratio'; max?: number; min?: number };

/** One benchmark figure beside its raw baseline from the same run (see docs/design.md). */
export interface BenchFigure {
  value: number;
  unit: string;
  baseline: number;
  ratio: number;
  goal?: Goal;
  /** Whether a lower value is better (latency, time, bytes); default higher. */
  better?: 'higher' | 'lower';
  [extra: string]: unknown;
}

export const DEFAULT_REPORT = 'reports/bench.json';

/**
 * Sections of reports/bench.json that are not figures: `peers` (ours beside each peer,
 * bench/peers.ts), `cost` (USD per million orders, bench/cost.ts) and `costAtRest` (USD a month
 * with no orders, bench/atRest.ts). Each is replaced whole when its suite runs.
 */
export interface BenchSections {
  peers: unknown[];
  cost: unknown;
  costAtRest: unknown;
}

const SECTIONS: string[] = ['peers', 'cost', 'costAtRest'] satisfies (keyof BenchSections)[];

/** reports/bench.json: figures by name, and the sections. */
export type BenchReport = Record<string, BenchFigure | unknown> & Partial<BenchSections>;

/** The figures of a report (its sections left out). */
export function figuresOf(report: BenchReport): Record<string, BenchFigure> {
  return Object.fromEntries(
    Object.entries(report).filter(
      ([k, v]) => !SECTIONS.includes(k) && typeof v === 'object' && v !== null && 'value' in v,
    ),
  ) as Record<string, BenchFigure>;
}

/** A figure with its ratio to the baseline (two decimals). */
export function figure(
  value: number,
  unit: string,
  baseline: number,
  extra: Record<string, unknown> = {},
): BenchFigure {
  return {
    value,
    unit,
    baseline,
    ratio: baseline > 0 ? Math.round((value / baseline) * 100) / 100 : Number.NaN,
    ...extra,
  };
}

/**
 * Merges figures into the report file, keeping figures of benchmarks not run this time, and
 * returns the merged report.
 */
export async function writeFigures(
  path: string,
  figures: Record<string, BenchFigure>,
  sections: Partial<BenchSections> = {},
): Promise<BenchReport> {
  let existing: BenchReport = {};
  try {
    existing = JSON.parse(await readFile(path, 'utf8'));
  } catch {
    // first run
  }
  const merged = { ...existing, ...figures, ...sections } as BenchReport;
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, `${JSON.stringify(merged, null, 2)}\n`);
  return merged;
}

/** 'met', 'missed', or '' when the figure has no goal. */
export function goalStatus(f: BenchFigure): { text: string; met: boolean | undefined } {
  const g = f.goal;
  if (g === undefined) return { text: '', met: undefined };
  if (typeof g === 'number') return { text: `ratio ≥ ${g}`, met: f.ratio >= g };
  const x = g.on === 'value' ? f.value : f.ratio;
  const what = g.on === 'value' ? '' : 'ratio ';
  const unit = g.on === 'value' ? ` ${f.unit}` : '';
  const parts: string[] = [];
  let met = Number.isFinite(x);
  if (g.max !== undefined) {
    parts.push(`${what}≤ ${g.max}${unit}`);
    met &&= x <= g.max;
  }
  if (g.min !== undefined) {
    parts.push(`${what}≥ ${g.min}${unit}`);
    met &&= x >= g.min;
  }
  return { text: parts.join(', '), met };
}

const fmt = (n: number) =>
  Number.isFinite(n) ? (Math.abs(n) >= 100 ? String(Math.round(n)) : String(n)) : 'n/a';

function rows(report: Record<string, BenchFigure>): string[][] {
  return Object.entries(report).map(([name, f]) => {
    const g = goalStatus(f);
    return [
      name,
      `${fmt(f.value)} ${f.unit}`,
      `${fmt(f.baseline)} ${f.unit}`,
      fmt(f.ratio),
      g.text ? `${g.text}: ${g.met ? 'met' : 'MISSED'}` : '',
    ];
  });
}

const HEAD = ['benchmark', 'value', 'baseline', 'ratio', 'goal'];

/** A table with its columns aligned (for the terminal). */
function aligned(head: string[], rows: string[][]): string {
  const all = [head, ...rows];
  const widths = head.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return all.map((r) => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ')).join('\n');
}

/** The figures as an aligned text table (for the terminal). */
export const table = (report: Record<string, BenchFigure>) => aligned(HEAD, rows(report));

/** reports/bench.md beside the JSON: every figure with its baseline, ratio and goal. */
export async function writeSummary(jsonPath: string, full: BenchReport): Promise<string> {
  const report = figuresOf(full);
  const path = `${jsonPath.replace(/\.json$/, '')}.md`;
  const lines = [
    '# Benchmarks',
    '',
    `Written by \`npm run bench\` from \`${jsonPath}\` (figures of suites not run this time are kept from`,
    'earlier runs). Every figure sits beside a raw baseline measured in the same run; the ratio is',
    'value / baseline (for latency, time, memory and bytes lower is better).',
    '',
    `| ${HEAD.join(' | ')} | baseline is |`,
    `| ${HEAD.map(() => '---').join(' | ')} | --- |`,
    ...rows(report).map(
      (r, i) =>
        `| ${r.join(' | ')} | ${String(Object.values(report)[i]?.baselineName ?? '').replace(/\|/g, '/')} |`,
    ),
    '',
    ...(full.peers?.length ? peerMarkdown(full.peers as PeerRow[]) : []),
    ...(full.cost
      ? [
          '## Cost per million orders',
          '',
          'Every billable call counted in a steady-state run of the deployed stacks (`npm run bench --',
          '--suite cost`), priced from bench/prices.ts; hourly items at the stated throughput.',
          '',
          ...costMarkdown((full.cost as { configurations: ConfigurationCost[] }).configurations),
          '',
        ]
      : []),
    ...(full.costAtRest
      ? [
          '## A month at rest',
          '',
          'Fixed charges counted from the templates, the scheduled runs measured on the bundles',
          '(`npm run bench -- --suite cost-at-rest`), priced from bench/prices.ts.',
          '',
          ...atRestMarkdown((full.costAtRest as { months: AtRestMonth[] }).months),
          '',
        ]
      : []),
  ];
  await writeFile(path, lines.join('\n'));
  return path;
}

const PEER_HEAD = ['peer', 'job', 'ours', 'theirs', 'ours ÷ theirs'];

function peerCells(r: PeerRow): string[] {
  return [
    r.peer,
    r.job,
    `${fmt(r.ours)} ${r.unit.split(' ')[0]}`,
    `${fmt(r.theirs)}`,
    fmt(r.ratio),
  ];
}

/** The peers' rows for the terminal. */
export const peerTable = (rows: PeerRow[]) => aligned(PEER_HEAD, rows.map(peerCells));

function peerMarkdown(rows: PeerRow[]): string[] {
  const esc = (s: string) => s.replace(/\|/g, '/');
  return [
    '## Peers',
    '',
    'Ours beside the library a user would otherwise pick, same machine, same run, same work',
    '(`npm run bench -- --suite peers`); the ratio is ours ÷ theirs (for a lag, theirs ÷ ours), so',
    'above 1 means ours did better.',
    '',
    `| ${PEER_HEAD.join(' | ')} | unit | guarantee held (ours) | guarantee held (theirs) |`,
    `| ${PEER_HEAD.map(() => '---').join(' | ')} | --- | --- | --- |`,
    ...rows.map(
      (r) =>
        `| ${peerCells(r).map(esc).join(' | ')} | ${esc(r.unit)} | ${esc(r.guarantee.ours)} | ${esc(r.guarantee.theirs)} |`,
    ),
    '',
  ];
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}
