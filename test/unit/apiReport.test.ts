import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { API_DIR, apiReports, entryPoints } from '../../bin/apiReport.js';

/**
 * Each check compiles the declarations and runs API Extractor on every entry point (the CDK
 * entry's with aws-cdk-lib's types): tens of seconds, beyond the unit tests' default timeout.
 */
const REPORTS_MS = 180_000;

describe('the public API report (npm run api)', { timeout: REPORTS_MS }, () => {
  const copy = mkdtempSync(join(tmpdir(), 'api-report-'));
  afterAll(() => rmSync(copy, { recursive: true, force: true }));

  it('has one committed report per entry point of the exports map, each matching the code', () => {
    const results = apiReports(false);
    expect(results.map((r) => r.name).sort()).toEqual(
      entryPoints()
        .map((e) => e.name)
        .sort(),
    );
    expect(results.filter((r) => r.changed || !r.ok)).toEqual([]);
  });

  it('fails an entry point whose exports differ from its report', () => {
    cpSync(API_DIR, copy, { recursive: true });
    const report = join(copy, 'pg.api.md');
    const text = readFileSync(report, 'utf8');
    const edited = text.replace(/^export function mapPgError.*\n/m, '');
    expect(edited).not.toBe(text);
    writeFileSync(report, edited);
    const results = apiReports(false, copy);
    expect(results.find((r) => r.name === 'pg')).toMatchObject({ changed: true });
    expect(results.filter((r) => r.changed).map((r) => r.name)).toEqual(['pg']);
  });
});
