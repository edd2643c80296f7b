import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
export const ROOT = join(import.meta.dirname, '..', '..');
/** The repository's TypeScript compiler, run against a scratch project. */
export const TSC = join(ROOT, 'node_modules', '.bin', 'tsc');

export interface PackedFile {
  path: string;
  size: number;
}

/** `npm pack` of this repository into `dir` (its `prepack` builds `dist/`): the tarball and its files. */
export async function packLibrary(dir: string): Promise<{ tarball: string; files: PackedFile[] }> {
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dir], {
    cwd: ROOT,
    maxBuffer: 16 * 1024 * 1024,
  });
  const [packed] = JSON.parse(stdout.slice(stdout.indexOf('['))) as {
    filename: string;
    files: PackedFile[];
  }[];
  if (!packed) throw new Error('npm pack printed no package');
  return { tarball: join(dir, packed.filename), files: packed.files };
}

/**
 * A new project in `dir` that installs `packages` (a tarball path, registry names) the way a user
 * would: `npm install`, nothing linked from this repository.
 */
export async function scratchProject(dir: string, packages: readonly string[]): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(
    join(dir, 'package.json'),
    JSON.stringify({
      name: 'scratch',
      version: '0.0.0',
      private: true,
      type: 'module',
      // the `node` package installs a Node.js binary from the registry in its install script
      allowScripts: { node: true },
    }),
  );
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', ...packages], {
    cwd: dir,
    maxBuffer: 16 * 1024 * 1024,
  });
}

/** Runs `command` in `dir` (with `env` over this process's); resolves with its output whatever the exit code. */
export async function runIn(
  dir: string,
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(command, args, {
      cwd: dir,
      env: { ...process.env, ...env },
      maxBuffer: 16 * 1024 * 1024,
    });
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, output: `${e.stdout}${e.stderr}` };
  }
}
