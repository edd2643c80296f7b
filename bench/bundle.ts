import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { build } from 'esbuild';
import { progress } from './progress.js';
import { type BenchFigure, figure } from './report.js';

const ROOT = join(import.meta.dirname, '..');
/** Lambda's goal for one function's code: 1 MB minified (not MiB: the stricter reading). */
export const BUNDLE_GOAL_BYTES = 1_000_000;

/**
 * Each function in `functions/*` bundled with the settings of infra/constructs/NodeFunction.ts
 * (ESM, minified, node24, the AWS SDK v3 external as the runtime provides it, the createRequire
 * banner). The value is the size of the code file; the baseline is the share of it that comes
 * from third-party packages (what the function would weigh with none of our code).
 */
export async function benchBundles(): Promise<Record<string, BenchFigure>> {
  const names = (await readdir(join(ROOT, 'functions'), { withFileTypes: true }))
    .filter((d) => d.isDirectory() && d.name !== 'commons')
    .map((d) => d.name)
    .sort();
  const figures: Record<string, BenchFigure> = {};
  for (const name of names) {
    const result = await build({
      entryPoints: [join(ROOT, 'functions', name, 'index.ts')],
      outfile: join(ROOT, 'node_modules', '.cache', 'rm-bench', 'functions', name, 'index.mjs'),
      write: false,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node24',
      minify: true,
      sourcemap: true,
      mainFields: ['module', 'main'],
      external: ['@aws-sdk/*'],
      banner: {
        js: "import{createRequire}from'module';const require=createRequire(import.meta.url);",
      },
      metafile: true,
      logLevel: 'error',
    });
    const [path, out] = Object.entries(result.metafile.outputs).find(([p]) =>
      p.endsWith('.mjs'),
    ) as [string, (typeof result.metafile.outputs)[string]];
    const code = result.outputFiles.find((f) => f.path.endsWith('.mjs'));
    const map = result.outputFiles.find((f) => f.path.endsWith('.map'));
    const bytes = code?.contents.byteLength ?? out.bytes;
    let thirdParty = 0;
    const byPackage = new Map<string, number>();
    for (const [input, { bytesInOutput }] of Object.entries(out.inputs)) {
      const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input);
      if (!m) continue;
      thirdParty += bytesInOutput;
      byPackage.set(m[1] as string, (byPackage.get(m[1] as string) ?? 0) + bytesInOutput);
    }
    const largest = [...byPackage]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 5)
      .map(([pkg, b]) => ({ package: pkg, bytes: b }));
    progress(
      `  ${name}: ${bytes.toLocaleString('en')} bytes (${thirdParty.toLocaleString('en')} from packages; largest ${largest[0]?.package ?? '-'})`,
    );
    figures[`bundle.${name}`] = figure(bytes, 'bytes', thirdParty, {
      better: 'lower',
      goal: { on: 'value', max: BUNDLE_GOAL_BYTES },
      what: `functions/${name}/index.ts bundled like NodeFunction (ESM, minified, node24, @aws-sdk/* external)`,
      baselineName: 'bytes of the same bundle that come from third-party packages',
      file: path,
      sourceMapBytes: map?.contents.byteLength,
      largestPackages: largest,
    });
  }
  return figures;
}
