import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, symlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The repository root: the nearest folder above this module with a cdk.json (this file is
 * devkit/lambda/runtimeDir.ts, or bundled into node_modules/.cache by the benchmarks).
 */
export const REPO_ROOT = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'cdk.json'))) {
    const up = dirname(dir);
    if (up === dir) return process.cwd();
    dir = up;
  }
  return dir;
})();

/**
 * The folder the runner's `NODE_PATH` points at in place of the runtime's
 * `/var/runtime/node_modules`: the AWS SDK for JavaScript v3 as the nodejs24.x runtime ships it
 * (every `@aws-sdk/*` package and what they depend on, `@smithy/*`, `@aws-crypto/*`, …), and
 * nothing else. The packages are symbolic links into this checkout's node_modules (its SDK
 * version, not necessarily the runtime's). A bundle that imports anything else fails here as it
 * would in AWS.
 */
export async function linkRuntimeSdk(runtimeDir: string): Promise<string[]> {
  const modules = join(REPO_ROOT, 'node_modules');
  const queue = (await readdir(join(modules, '@aws-sdk'))).map((n) => `@aws-sdk/${n}`);
  const seen = new Set<string>();
  while (queue.length > 0) {
    const name = queue.pop() as string;
    if (seen.has(name) || !existsSync(join(modules, name, 'package.json'))) continue;
    seen.add(name);
    const pkg = JSON.parse(await readFile(join(modules, name, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
    };
    // a dependency nested under the package is found from its real path; only hoisted ones need a link
    queue.push(...Object.keys(pkg.dependencies ?? {}));
  }
  const target = join(runtimeDir, 'node_modules');
  for (const name of seen) {
    const link = join(target, name);
    await mkdir(dirname(link), { recursive: true });
    await symlink(join(modules, name), link, 'dir');
  }
  return [...seen].sort();
}

/**
 * The Node.js 24 binary: this process's when it runs on 24 (npm scripts, the tests), else the
 * pinned `node` package's.
 */
export function node24(): string {
  if (process.versions.node.split('.')[0] === '24') return process.execPath;
  const pinned = join(REPO_ROOT, 'node_modules', 'node', 'bin', 'node');
  if (!existsSync(pinned)) throw new Error('no Node.js 24 binary: run npm ci (the node package)');
  return pinned;
}
