import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Extractor, ExtractorConfig, ExtractorLogLevel } from '@microsoft/api-extractor';
import { Command } from 'commander';

/**
 * `npm run api -- [check|update]`: the library's public API, one report per entry point of the
 * package's `exports` map (`api/<entry>.api.md`, written by API Extractor from the built
 * declarations). `check` (the default, and a unit test) exits 1 when an export changed without its
 * report; `update` rewrites the reports, to be reviewed and committed with the change and noted in
 * CHANGELOG.md.
 */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const API_DIR = join(ROOT, 'api');

interface PackageJson {
  name: string;
  exports: Record<string, string | { types: string; default: string }>;
}

/** Where the check builds the declarations (apart from `dist/`, which `npm pack` rebuilds). */
const BUILD_DIR = join(ROOT, '.tmp', 'api', 'dist');

/** The entry points with declarations: `.` is `index`, `./sqs` is `sqs`; paths under `outDir`. */
export function entryPoints(outDir = join(ROOT, 'dist')): { name: string; types: string }[] {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as PackageJson;
  return Object.entries(pkg.exports).flatMap(([subpath, target]) =>
    typeof target === 'string'
      ? []
      : [
          {
            name: subpath === '.' ? 'index' : subpath.slice(2),
            types: join(outDir, relative('dist', target.types)),
          },
        ],
  );
}

/**
 * Builds the declarations, then compares (or, with `update`, rewrites) each entry point's report
 * in `reportDir`.
 */
export function apiReports(
  update: boolean,
  reportDir = API_DIR,
): { name: string; changed: boolean; ok: boolean }[] {
  rmSync(BUILD_DIR, { recursive: true, force: true });
  execFileSync(
    join(ROOT, 'node_modules', '.bin', 'tsc'),
    ['-p', 'tsconfig.build.json', '--outDir', BUILD_DIR],
    { cwd: ROOT, stdio: 'inherit' },
  );
  return entryPoints(BUILD_DIR).map(({ name, types }) => {
    const config = ExtractorConfig.prepare({
      configObjectFullPath: join(ROOT, 'api', 'api-extractor.json'),
      packageJsonFullPath: join(ROOT, 'package.json'),
      configObject: {
        projectFolder: ROOT,
        mainEntryPointFilePath: types,
        compiler: {
          overrideTsconfig: {
            compilerOptions: {
              target: 'es2024',
              module: 'nodenext',
              moduleResolution: 'nodenext',
              lib: ['es2024'],
              types: ['node'],
              strict: true,
              skipLibCheck: true,
            },
            files: [types],
          },
        },
        apiReport: {
          enabled: true,
          reportFileName: `${name}.api.md`,
          reportFolder: reportDir,
          reportTempFolder: join(ROOT, '.tmp', 'api'),
        },
        docModel: { enabled: false },
        dtsRollup: { enabled: false },
        tsdocMetadata: { enabled: false },
        newlineKind: 'lf',
        messages: {
          // the report is the product here; release tags and TSDoc style are not enforced
          extractorMessageReporting: {
            default: { logLevel: ExtractorLogLevel.None, addToApiReportFile: false },
          },
          tsdocMessageReporting: { default: { logLevel: ExtractorLogLevel.None } },
          compilerMessageReporting: { default: { logLevel: ExtractorLogLevel.Error } },
        },
      },
    });
    const result = Extractor.invoke(config, { localBuild: update, messageCallback: quiet });
    return { name, changed: result.apiReportChanged, ok: result.succeeded };
  });
}

/** Keeps API Extractor's progress lines out of the output; errors still fail the run. */
function quiet(message: {
  logLevel: ExtractorLogLevel;
  messageId: string;
  handled: boolean;
}): void {
  // and the notice of a report created, which `update` reports itself
  if (
    message.logLevel === ExtractorLogLevel.Info ||
    message.logLevel === ExtractorLogLevel.Verbose ||
    message.messageId === 'console-api-report-created'
  ) {
    message.handled = true;
  }
}

const program = new Command('api').description(
  "the library's public API against the committed reports in api/",
);
program
  .command('check', { isDefault: true })
  .description('exit 1 when an entry point changed without its report (default)')
  .action(() => {
    const stale = apiReports(false).filter((r) => r.changed || !r.ok);
    for (const r of stale) {
      console.error(`api/${r.name}.api.md: the entry point's exports differ from the report`);
    }
    if (stale.length > 0) {
      console.error('Review the change, run `npm run api -- update`, note it in CHANGELOG.md.');
      process.exitCode = 1;
    } else
      console.log(`api: ${entryPoints().length} entry points match ${relative(ROOT, API_DIR)}/`);
  });
program
  .command('update')
  .description('rewrite the reports from the built declarations')
  .action(() => {
    for (const r of apiReports(true))
      console.log(`api/${r.name}.api.md${r.changed ? ' (changed)' : ''}`);
  });

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await program.parseAsync();
}
