import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TRANSPORT_NAMES } from '../../shared/transport/index.js';

/**
 * A transport is one registered module: code chooses a backend through the registry and its
 * behaviour by the backend's declared capabilities, never by comparing the transport's name.
 * Names are compared only where a transport is chosen: the registries (`shared/transport/`,
 * `devkit/transports/`), the backends' own folders, the CDK app (`infra/`: which stacks deploy)
 * and the benchmarks' option parsing (`bench/run.ts`: suites that exist for one broker only).
 */
const ROOT = join(import.meta.dirname, '..', '..');
const CHOOSERS = /^(shared\/transport\/|devkit\/transports\/|infra\/|bench\/run\.ts$)/;

const names = TRANSPORT_NAMES.join('|');
const COMPARISON = new RegExp(
  `(===|!==)\\s*'(${names})'|'(${names})'\\s*(===|!==)|case\\s+'(${names})'\\s*:|\\.includes\\('(${names})'\\)`,
);

/** Files (not tests) that compare a transport's name, with the first line that does. */
function comparingFiles(): Record<string, string> {
  const files = execFileSync('git', ['ls-files', '*.ts'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter((f) => f && !f.startsWith('test/'));
  const found: Record<string, string> = {};
  for (const file of files) {
    const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
    const i = lines.findIndex((l) => COMPARISON.test(l) && !l.trim().startsWith('*'));
    if (i >= 0) found[file] = `${i + 1}: ${lines[i]?.trim()}`;
  }
  return found;
}

describe('transport switches', () => {
  it('finds a comparison when there is one (the reader works)', () => {
    expect(COMPARISON.test("if (c.transport === 'sqs') {")).toBe(true);
    expect(COMPARISON.test("    case 'rabbitmq':")).toBe(true);
    expect(COMPARISON.test("if (transports.includes('rabbitmq')) {")).toBe(true);
    expect(COMPARISON.test("const name = 'sqs';")).toBe(false);
  });

  it('no file outside the registries, the backends, the CDK app and the bench options compares a transport name', () => {
    const outside = Object.entries(comparingFiles())
      .filter(([file]) => !CHOOSERS.test(file))
      .map(([file, line]) => `${file}:${line}`);
    expect(outside).toEqual([]);
  });
});
