import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** How a supervised process ended (one incarnation). */
export interface Exit {
  role: string;
  incarnation: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Killed by the controller (a fault it injected, or the shutdown). */
  byController: boolean;
  /** The fault point it died at (`FAULTS=point:exit`), if any. */
  faultPoint: string | undefined;
  /** Milliseconds it lived. */
  livedMs: number;
}

export interface ChildSpec {
  role: string;
  /** Arguments after `node`. */
  args: string[];
  env: Record<string, string>;
  /** A line on stdout that means "ready" (awaited after each start). */
  ready?: RegExp;
}

/**
 * One process kept running by a supervisor, as a process manager (or Lambda) would: when it dies
 * it is started again after `restartDelayMs`. Each incarnation writes stdout and stderr to its own
 * log file (read back for journal lines and exit reasons). The controller can SIGKILL it at any
 * moment, or arm a fault point for the next incarnation only.
 */
export class Supervised {
  private child: ChildProcess | undefined;
  private incarnation = 0;
  private stopping = false;
  private killedByController = false;
  private startedAt = 0;
  private nextFaults = '';
  private armed = '';
  private readyWaiters: (() => void)[] = [];
  private restartAfterMs: number | undefined;
  private isReady = false;
  readonly exits: Exit[] = [];
  readonly logs: string[] = [];

  constructor(
    private readonly spec: ChildSpec,
    private readonly options: { logDir: string; restartDelayMs: number; cwd?: string },
  ) {}

  get role(): string {
    return this.spec.role;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get ready(): boolean {
    return this.isReady;
  }

  /** The fault points armed in the running incarnation (`FAULTS`), or ''. */
  get armedFaults(): string {
    return this.armed;
  }

  /** The next incarnation starts with `FAULTS=spec` (one incarnation only). */
  armNext(spec: string): void {
    this.nextFaults = spec;
  }

  start(): void {
    if (this.stopping) return;
    this.incarnation++;
    const log = join(this.options.logDir, `${this.spec.role}.${this.incarnation}.log`);
    this.logs.push(log);
    const fd = openSync(log, 'w');
    this.armed = this.nextFaults;
    this.nextFaults = '';
    this.killedByController = false;
    this.isReady = false;
    this.startedAt = Date.now();
    const child = spawn(process.execPath, this.spec.args, {
      cwd: this.options.cwd ?? process.cwd(),
      env: { ...process.env, ...this.spec.env, FAULTS: this.armed },
      stdio: ['ignore', fd, fd],
    });
    closeSync(fd);
    this.child = child;
    const incarnation = this.incarnation;
    if (this.spec.ready) this.watchReady(log, this.spec.ready, child);
    else this.markReady();
    child.on('exit', (code, signal) => {
      const text = safeRead(log);
      const fault = /FAULT ([a-z.-]+): exiting now/.exec(text)?.[1];
      this.exits.push({
        role: this.spec.role,
        incarnation,
        code,
        signal,
        byController: this.killedByController,
        faultPoint: fault,
        livedMs: Date.now() - this.startedAt,
      });
      if (this.child === child) this.child = undefined;
      this.isReady = false;
      const delay = this.restartAfterMs ?? this.options.restartDelayMs;
      this.restartAfterMs = undefined;
      if (!this.stopping) setTimeout(() => this.start(), delay).unref();
    });
  }

  private markReady(): void {
    this.isReady = true;
    for (const w of this.readyWaiters.splice(0)) w();
  }

  /** Polls the incarnation's log for its ready line (the child writes straight to the file). */
  private watchReady(log: string, pattern: RegExp, child: ChildProcess): void {
    const timer = setInterval(() => {
      if (this.child !== child) return clearInterval(timer);
      if (pattern.test(safeRead(log))) {
        clearInterval(timer);
        this.markReady();
      }
    }, 100);
    timer.unref();
  }

  /** Resolves when an incarnation is ready (or rejects after `timeoutMs`). */
  waitReady(timeoutMs = 60_000): Promise<void> {
    if (this.isReady) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const last = this.logs.at(-1);
        reject(
          new Error(
            `${this.spec.role} not ready within ${timeoutMs} ms; last log ${last}:\n${last ? safeRead(last).slice(-2000) : ''}`,
          ),
        );
      }, timeoutMs);
      this.readyWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /**
   * SIGKILL now (a crash); the supervisor starts it again, after `restartAfterMs` if given.
   * False if it was not running.
   */
  kill(options: { restartAfterMs?: number } = {}): boolean {
    if (!this.child || this.child.exitCode !== null || this.child.signalCode !== null) return false;
    this.killedByController = true;
    this.restartAfterMs = options.restartAfterMs;
    return this.child.kill('SIGKILL');
  }

  /** Stops for good: SIGTERM (in-flight work finishes), SIGKILL after `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    this.stopping = true;
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    this.killedByController = true;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }

  /** Every incarnation's log, concatenated. */
  readAllLogs(): string {
    return this.logs.map(safeRead).join('\n');
  }
}

function safeRead(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}
