import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/** One benchmark figure beside its raw baseline from the same run (DESIGN §10). */
export interface BenchFigure {
  value: number;
  unit: string;
  baseline: number;
  ratio: number;
  [extra: string]: unknown;
}

export const DEFAULT_REPORT = 'reports/bench.json';

/** Merges figures into the report file, keeping figures of benchmarks not run this time. */
export async function writeFigures(
  path: string,
  figures: Record<string, BenchFigure>,
): Promise<void> {
  let existing: Record<string, BenchFigure> = {};
  try {
    existing = JSON.parse(await readFile(path, 'utf8'));
  } catch {
    // first run
  }
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, `${JSON.stringify({ ...existing, ...figures }, null, 2)}\n`);
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export const progress = (line: string) => process.stderr.write(`${line}\n`);
