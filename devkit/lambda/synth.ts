import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { delimiter, join, relative } from 'node:path';
import { sleep } from '../../shared/util/async.js';
import { REPO_ROOT } from './runtimeDir.js';

/** What the synthesized app's code and settings come from: a change to any of them is a new synth. */
const SOURCES = ['infra', 'shared', 'functions'];
const SOURCE_FILES = ['cdk.json', 'package.json', 'package-lock.json', 'tsconfig.json'];
/** Where assemblies are kept, one folder per source hash. */
const CACHE_DIR = join(REPO_ROOT, '.tmp', 'cdk-assemblies');

export interface SynthOptions {
  transport: 'sqs' | 'rabbitmq';
  /**
   * More CDK context (`-c key=value`), e.g. `{ pipeline: JSON.stringify({ sqs: { batchSize: 3 } }) }`
   * (infra/app.ts, `pipeline` overrides).
   */
  context?: Record<string, string>;
  /** Progress lines (`synthesizing …`). */
  log?: (line: string) => void;
}

export interface SynthResult {
  /** The cloud assembly folder (`manifest.json`, templates, `asset.<hash>/`). */
  dir: string;
  /** True when an assembly of the same sources and settings was reused. */
  cached: boolean;
  /** How long `cdk synth` took (0 when cached). */
  durationMs: number;
  key: string;
}

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await filesUnder(p)));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

/**
 * What a local run synthesizes with besides the caller's settings: the relay's reserved
 * concurrency of a production account (2, `-c pipeline='{"relay":{"reservedConcurrency":2}}'`).
 * The app leaves it unreserved by default so that it deploys on a new account (infra/config.ts);
 * this machine is no account's concurrency, and unreserved every kick would start one more local
 * relay environment. A caller's own `relay.reservedConcurrency` wins.
 */
export const LOCAL_PIPELINE_DEFAULTS = { relay: { reservedConcurrency: 2 } } as const;

/** `options` with {@link LOCAL_PIPELINE_DEFAULTS} under its `pipeline` context. */
export function withLocalDefaults<T extends Pick<SynthOptions, 'context'>>(options: T): T {
  const raw = options.context?.pipeline;
  const pipeline = (raw ? JSON.parse(raw) : {}) as { relay?: Record<string, unknown> };
  return {
    ...options,
    context: {
      ...options.context,
      pipeline: JSON.stringify({
        ...pipeline,
        relay: { ...LOCAL_PIPELINE_DEFAULTS.relay, ...pipeline.relay },
      }),
    },
  };
}

/** A digest of everything `cdk synth` reads, and of the settings it is run with. */
export async function sourceKey(options: SynthOptions): Promise<string> {
  const hash = createHash('sha256');
  hash.update(
    JSON.stringify({ transport: options.transport, context: options.context ?? {}, node: 24 }),
  );
  const files = [
    ...(await Promise.all(SOURCES.map((d) => filesUnder(join(REPO_ROOT, d))))).flat(),
    ...SOURCE_FILES.map((f) => join(REPO_ROOT, f)),
  ].sort();
  for (const f of files) {
    hash.update(relative(REPO_ROOT, f)).update('\0');
    hash.update(await readFile(f)).update('\0');
  }
  return hash.digest('hex').slice(0, 20);
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * `cdk synth` of the app for one transport, as `npm run synth` runs it (bundling with the local
 * esbuild, the feature flags of cdk.json), into a folder of its own per source digest. An
 * assembly of the same sources and settings is reused; several processes asking at once wait for
 * the one that synthesizes (a lock folder beside the cache entry). cdk-nag is left out: it only
 * validates, the templates and assets are the same (compared: only `CDKMetadata` differs).
 */
export async function synthesize(given: SynthOptions): Promise<SynthResult> {
  const options = withLocalDefaults(given);
  return cached(CACHE_DIR, await sourceKey(options), async (partial) => {
    options.log?.(`synthesizing the ${options.transport} app (cdk synth, esbuild bundling)…`);
    await runCdkSynth(options, partial);
  });
}

/**
 * The folder `root/key`, built by `build` into a partial folder first when it does not exist
 * yet. One builder at a time across processes (a lock folder beside it holding the builder's
 * pid; a dead builder's lock is taken over); the others wait and reuse its result.
 */
async function cached(
  root: string,
  key: string,
  build: (dir: string) => Promise<void>,
): Promise<SynthResult> {
  await mkdir(root, { recursive: true });
  const dir = join(root, key);
  const done = join(dir, '.complete');
  const lock = join(root, `${key}.lock`);
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    if (existsSync(done)) return { dir, cached: true, durationMs: 0, key };
    try {
      await mkdir(lock);
    } catch {
      const holder = Number(await readFile(join(lock, 'pid'), 'utf8').catch(() => '0'));
      if (holder > 0 && !alive(holder)) await rm(lock, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`waited 15 min for another build of ${dir}`);
      await sleep(500);
      continue;
    }
    try {
      await writeFile(join(lock, 'pid'), String(process.pid));
      if (existsSync(done)) return { dir, cached: true, durationMs: 0, key };
      const started = Date.now();
      const partial = `${dir}.partial-${process.pid}`;
      await rm(partial, { recursive: true, force: true });
      await build(partial);
      await writeFile(join(partial, '.complete'), new Date().toISOString());
      await rm(dir, { recursive: true, force: true });
      await rename(partial, dir);
      await prune(root, 8);
      return { dir, cached: false, durationMs: Date.now() - started, key };
    } finally {
      await rm(lock, { recursive: true, force: true });
    }
  }
}

function runCdkSynth(options: SynthOptions, out: string): Promise<void> {
  const bin = join(REPO_ROOT, 'node_modules', '.bin');
  const context = { transport: options.transport, nag: 'off', ...options.context };
  const args = [
    'synth',
    '--quiet',
    '--no-notices',
    ...Object.entries(context).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
    '-o',
    out,
  ];
  return new Promise((resolve, reject) => {
    // npm scripts run on the pinned Node 24 (node_modules/.bin/node): so does the app (`npx tsx`)
    const child = spawn(join(bin, 'cdk'), args, {
      cwd: REPO_ROOT,
      env: { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ''}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    for (const stream of [child.stdout, child.stderr]) {
      stream.on('data', (d) => (output += d));
    }
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0) resolve();
      else {
        reject(
          new Error(
            `cdk synth ${args.join(' ')} exited ${code}:\n${output.split('\n').slice(-25).join('\n')}`,
          ),
        );
      }
    });
  });
}

/** Keeps the `keep` most recent assemblies. */
async function prune(root: string, keep: number): Promise<void> {
  const entries = await readdir(root, { withFileTypes: true });
  const dirs = await Promise.all(
    entries
      .filter((e) => e.isDirectory() && /^[0-9a-f]{20}$/.test(e.name))
      .map(async (e) => ({
        path: join(root, e.name),
        at: (await stat(join(root, e.name))).mtimeMs,
      })),
  );
  dirs.sort((a, b) => b.at - a.at);
  for (const d of dirs.slice(keep)) await rm(d.path, { recursive: true, force: true });
}

/**
 * A cloud assembly to read settings from: the cached one of a full `synthesize` of the same
 * sources and settings when there is one, else the app's templates without building its bundles,
 * synthesized in this process (several seconds, then cached like `synthesize`'s assemblies):
 * enough for the settings a template carries (event source mappings, schedules, function
 * configuration and environment), not for running the functions (their asset folders are
 * empty). Same context as `synthesize` (cdk.json's feature flags, the transport, overrides).
 */
export async function templatesFor(
  given: Pick<SynthOptions, 'transport' | 'context'>,
): Promise<{ dir: string; bundled: boolean }> {
  const options = withLocalDefaults(given);
  const key = await sourceKey(options);
  const full = join(CACHE_DIR, key);
  if (existsSync(join(full, '.complete'))) return { dir: full, bundled: true };
  const { dir } = await cached(join(CACHE_DIR, 'templates'), key, async (outdir) => {
    const [{ App }, { addPipeline }] = await Promise.all([
      import('aws-cdk-lib'),
      import('../../infra/pipelineApp.js'),
    ]);
    const cdkJson = JSON.parse(await readFile(join(REPO_ROOT, 'cdk.json'), 'utf8')) as {
      context?: Record<string, unknown>;
    };
    const app = new App({
      outdir,
      context: {
        ...cdkJson.context,
        transport: options.transport,
        nag: 'off',
        'aws:cdk:bundling-stacks': [],
        // what the CLI turns on: construct paths and asset folders in the template's metadata
        'aws:cdk:enable-path-metadata': true,
        'aws:cdk:enable-asset-metadata': true,
        ...options.context,
      },
    });
    addPipeline(app);
    app.synth();
  });
  return { dir, bundled: false };
}
