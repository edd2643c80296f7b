import { type ChildProcess, spawn } from 'node:child_process';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RetryBudget } from '../../config/env.js';
import type { Observation } from './recorder.js';

/** What a consumer process of the kit runs (`worker.ts`): given as its one argument, in JSON. */
export interface WorkerSpec {
  /** The subject module's absolute path. */
  subject: string;
  transport: string;
  /** The backend's configuration on the scenario's namespace (JSON: no functions). */
  config: Record<string, unknown>;
  databaseUrl: string;
  budget: RetryBudget;
  /** The largest batch (and prefetch), so that a crash leaves work behind. */
  maxBatch: number;
  /** A pause after the handler returned and before the batch is settled (0: none). */
  pauseAfterHandlerMs: number;
  /** How its observations are labelled (`child 1`). */
  label: string;
}

/** One line of a worker's stdout. */
export type WorkerLine = { observation: Observation } | { ready: true } | { error: string };

const SELF = fileURLToPath(import.meta.url);
const EXT = extname(SELF);
const WORKER = fileURLToPath(new URL(`./worker${EXT}`, import.meta.url));
const TS = /\.[mc]?ts$/;

/**
 * Node's arguments for the worker: from the sources (this repository) or for a subject written in
 * TypeScript, through tsx (`--import tsx`, resolved from the working directory); from the built
 * package, plain node.
 */
export function workerArgs(spec: WorkerSpec): string[] {
  const loader = TS.test(EXT) || TS.test(spec.subject) ? ['--import', 'tsx'] : [];
  return [...loader, WORKER, JSON.stringify(spec)];
}

/** A consumer process of the kit: its lines as they come, SIGKILL, a graceful stop. */
export class ChildWorker {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private stdout = '';
  private stderr = '';
  private readonly readyPromise: Promise<void>;

  constructor(
    spec: WorkerSpec,
    private readonly onObservation: (o: Observation) => void,
  ) {
    this.child = spawn(process.execPath, workerArgs(spec), {
      cwd: process.cwd(),
      env: process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let ready: () => void = () => {};
    let failed: (err: Error) => void = () => {};
    this.readyPromise = new Promise<void>((resolve, reject) => {
      ready = resolve;
      failed = reject;
    });
    this.readyPromise.catch(() => {});
    this.child.stdout?.setEncoding('utf8');
    this.child.stdout?.on('data', (chunk: string) => {
      this.stdout += chunk;
      let nl = this.stdout.indexOf('\n');
      while (nl >= 0) {
        const line = this.stdout.slice(0, nl);
        this.stdout = this.stdout.slice(nl + 1);
        nl = this.stdout.indexOf('\n');
        const parsed = parseLine(line);
        if (!parsed) continue;
        if ('observation' in parsed) this.onObservation(parsed.observation);
        else if ('ready' in parsed) ready();
        else failed(new Error(`${spec.label}: ${parsed.error}`));
      }
    });
    this.child.stderr?.setEncoding('utf8');
    this.child.stderr?.on('data', (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-4_000);
    });
    this.exited = new Promise((resolve) => {
      this.child.once('close', (code, signal) => {
        failed(
          new Error(`${spec.label} exited (${code ?? signal}) before it was ready${this.tail()}`),
        );
        resolve({ code, signal });
      });
    });
  }

  /** Resolves once its consumer runs; rejects if it exits first or after `timeoutMs`. */
  async ready(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.readyPromise,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(new Error(`no consumer process ready within ${timeoutMs} ms${this.tail()}`)),
            timeoutMs,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Frozen (SIGSTOP): it holds what it holds, answers nothing, keeps its connections open. */
  freeze(): void {
    if (this.running) this.child.kill('SIGSTOP');
  }

  /** Resumed (SIGCONT): it carries on as if no time had passed. */
  thaw(): void {
    if (this.running) this.child.kill('SIGCONT');
  }

  /** A crash: SIGKILL, nothing settled or closed. */
  kill(): void {
    if (this.running) this.child.kill('SIGKILL');
  }

  /** SIGTERM (what is in flight is settled, then it exits), SIGKILL after `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    if (this.running) {
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.kill(), graceMs);
      await this.exited;
      clearTimeout(timer);
    }
    await this.exited;
  }

  private tail(): string {
    const text = this.stderr.trim();
    return text ? `: ${text.split('\n').slice(-5).join(' | ')}` : '';
  }
}

function parseLine(line: string): WorkerLine | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    return JSON.parse(line) as WorkerLine;
  } catch {
    return undefined;
  }
}
