import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { build } from 'esbuild';
import { NodeProcess } from '../devkit/processes.js';
import { SERVICE_MIGRATIONS_DIR } from '../shared/pipeline/schema.js';

const ROOT = join(import.meta.dirname, '..');
const BUILD_DIR = join(ROOT, 'node_modules', '.cache', 'rm-bench');
const LOG_DIR = join(BUILD_DIR, 'logs');

/**
 * `bin/dev.ts` bundled once with esbuild (our code in one file, packages left to node_modules), so
 * the roles run on plain node: the RSS we sample is the role's, not the TypeScript loader's.
 */
export async function buildDevBundle(): Promise<string> {
  const outfile = join(BUILD_DIR, 'dev.mjs');
  await build({
    entryPoints: [join(ROOT, 'bin', 'dev.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    packages: 'external',
    logLevel: 'error',
  });
  return outfile;
}

/**
 * Starts a role, `node <args>` in the repository root, and waits for a stdout line starting with
 * `readyLine`. Stdout goes to a file, not a pipe: node writes to a pipe synchronously, so a busy
 * reader (this process, driving the load) would stall the role on its own log lines. The file is
 * removed when the role stops; stderr's last lines are kept for error messages.
 */
export async function startRole(
  name: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  readyLine: string,
  timeoutMs = 30_000,
): Promise<NodeProcess> {
  await mkdir(LOG_DIR, { recursive: true });
  const role = new NodeProcess({
    name,
    args,
    cwd: ROOT,
    env: { MIGRATIONS_DIR: SERVICE_MIGRATIONS_DIR, ...env },
    output: {
      file: join(LOG_DIR, `${name}-${process.pid}-${Date.now()}.log`),
      stderr: 'capture',
      removeOnStop: true,
    },
  });
  try {
    await role.waitFor(new RegExp(`^${escapeRegExp(readyLine)}`, 'm'), { timeoutMs, pollMs: 50 });
  } catch (err) {
    if (role.running) await role.stop(1_000);
    throw err;
  }
  return role;
}

/** The grace period of a role's SIGTERM (it finishes in-flight work) before SIGKILL. */
export const ROLE_STOP_GRACE_MS = 15_000;

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The raw HTTP baseline: a trivial node:http server answering 201 with a small JSON body. */
export const RAW_HTTP_SERVER = `
import { createServer } from 'node:http';
const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    JSON.parse(Buffer.concat(chunks).toString() || '{}');
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end('{"orderId":"00000000-0000-4000-8000-000000000000","eventId":"00000000-0000-4000-8000-000000000000"}');
  });
});
server.listen(Number(process.env.PORT), '127.0.0.1', () => console.log('listening'));
process.on('SIGTERM', () => server.close(() => process.exit(0)) && server.closeAllConnections());
`;

/** An SQS-compatible server (fauxqs) in a process of its own, so its CPU is not the bench's. */
export const FAUXQS_SERVER = `
const { startFauxqs } = await import('fauxqs');
const server = await startFauxqs({ port: Number(process.env.PORT), logger: false });
console.log('listening');
process.on('SIGTERM', async () => { await server.stop(); process.exit(0); });
`;
