import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, open, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { build } from 'esbuild';
import { MIGRATIONS_DIR } from '../shared/db/migrate.js';

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

/** A free TCP port on 127.0.0.1 (closed again; the child binds it right after). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

export interface Memory {
  /** Peak resident set size since the process started (VmHWM), MB. */
  peakMb: number;
  /** Current resident set size (VmRSS), MB. */
  rssMb: number;
}

export async function readMemory(pid: number): Promise<Memory | undefined> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]);
    return {
      peakMb: Math.round(kb('VmHWM') / 102.4) / 10,
      rssMb: Math.round(kb('VmRSS') / 102.4) / 10,
    };
  } catch {
    return undefined; // gone, or not Linux
  }
}

/** A child node process that prints `readyLine` (a prefix) on stdout once it is ready. */
export class Role {
  private tail: string[] = [];
  private exited: Promise<number | null>;

  private constructor(
    readonly name: string,
    readonly child: ChildProcess,
    /** Where its stdout (the structured logs) goes; removed when it stops. */
    readonly logPath: string,
  ) {
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (d: string) => {
      this.tail.push(...d.split('\n').filter(Boolean));
      this.tail = this.tail.slice(-20);
    });
  }

  get pid(): number {
    return this.child.pid as number;
  }

  /**
   * Starts `node <args>` and waits for a stdout line starting with `readyLine`. Stdout goes to a
   * file, not a pipe: node writes to a pipe synchronously, so a busy reader (this process, driving
   * the load) would stall the role on its own log lines.
   */
  static async start(
    name: string,
    args: readonly string[],
    env: NodeJS.ProcessEnv,
    readyLine: string,
    timeoutMs = 30_000,
  ): Promise<Role> {
    await mkdir(LOG_DIR, { recursive: true });
    const logPath = join(LOG_DIR, `${name}-${process.pid}-${Date.now()}.log`);
    const log = await open(logPath, 'w');
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, MIGRATIONS_DIR, ...env },
      stdio: ['ignore', log.fd, 'pipe'],
    });
    await log.close();
    const role = new Role(name, child, logPath);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`${name}: exited before ready\n${role.tail.join('\n')}`);
      const text = await readFile(logPath, 'utf8');
      if (text.split('\n').some((l) => l.startsWith(readyLine))) return role;
      if (Date.now() > deadline) {
        await role.stop(1_000);
        throw new Error(`${name}: not ready within ${timeoutMs} ms\n${role.tail.join('\n')}`);
      }
      await sleep(50);
    }
  }

  memory(): Promise<Memory | undefined> {
    return readMemory(this.pid);
  }

  /** SIGTERM (the roles finish in-flight work), SIGKILL after `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
      await this.exited;
      clearTimeout(timer);
    }
    await rm(this.logPath, { force: true });
  }
}

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
