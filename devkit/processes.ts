import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { JournalEntry } from '../shared/consumer/journal.js';

/**
 * Child node processes for the tooling: the tests' `npm run dev` roles, the benchmark's roles and
 * raw servers, the soak's supervised pipeline. One runner (`NodeProcess`: spawn, output, ready
 * line, signals, exit) and a supervisor on top of it (`Supervised`: restarts, fault points).
 */

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * Where a process's output goes:
 * - `capture`: stdout and stderr kept in memory, through pipes (short-lived processes, tests);
 * - `{ file }`: stdout written to the file by the child itself, stderr too unless `stderr:
 *   'capture'` (then only its last lines are kept, for error messages). A file, not a pipe, for
 *   anything under load: node writes to a pipe synchronously, so a busy reader (a process driving
 *   the load) would stall the child on its own log lines. `removeOnStop` deletes it after `stop`.
 */
export type ProcessOutput =
  | 'capture'
  | { file: string; stderr?: 'file' | 'capture'; removeOnStop?: boolean };

export interface NodeProcessOptions {
  /** For messages (`api`, `relay`, `consumer`, `fauxqs`, …). */
  name: string;
  /** Arguments after `node`. */
  args: readonly string[];
  /** Set over `process.env`. */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Default `capture`. */
  output?: ProcessOutput;
}

const STDERR_TAIL_LINES = 20;

/** One child node process (`process.execPath <args>`), started on construction. */
export class NodeProcess {
  readonly name: string;
  readonly child: ChildProcess;
  /** The file stdout goes to (`output: { file }`), else undefined. */
  readonly logFile: string | undefined;
  /** Resolves once the process has exited and its output streams are closed. */
  readonly exited: Promise<ProcessExit>;
  private stdout = '';
  private stderr = '';
  private exit: ProcessExit | undefined;
  private readonly watchers = new Set<() => void>();
  private readonly output: Exclude<ProcessOutput, 'capture'> | undefined;

  constructor(options: NodeProcessOptions) {
    this.name = options.name;
    this.output = options.output && options.output !== 'capture' ? options.output : undefined;
    this.logFile = this.output?.file;
    const fd = this.output ? openSync(this.output.file, 'w') : undefined;
    const stderrToFile = this.output !== undefined && this.output.stderr !== 'capture';
    try {
      this.child = spawn(process.execPath, [...options.args], {
        cwd: options.cwd ?? process.cwd(),
        env: { ...process.env, ...options.env },
        stdio: ['ignore', fd ?? 'pipe', stderrToFile ? (fd as number) : 'pipe'],
      });
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
    const captureAll = this.output === undefined;
    this.child.stdout?.setEncoding('utf8');
    this.child.stdout?.on('data', (d: string) => {
      this.stdout += d;
      this.notify();
    });
    this.child.stderr?.setEncoding('utf8');
    this.child.stderr?.on('data', (d: string) => {
      this.stderr += d;
      if (!captureAll) {
        this.stderr = this.stderr
          .split('\n')
          .slice(-STDERR_TAIL_LINES - 1)
          .join('\n');
      }
    });
    this.exited = new Promise((resolve) => {
      this.child.once('error', (err) => {
        this.stderr += `\n${err.message}`;
      });
      // `close`, not `exit`: the output is complete (pipes drained) when it fires
      this.child.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
        this.exit = { code, signal };
        this.notify();
        resolve(this.exit);
      });
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return (
      this.exit === undefined && this.child.exitCode === null && this.child.signalCode === null
    );
  }

  /** Its stdout so far: captured, or the log file's contents (stdout and stderr, unless split). */
  text(): string {
    return this.logFile ? readOrEmpty(this.logFile) : this.stdout;
  }

  /** Captured stderr (all of it with `capture`; its last lines with `{ file, stderr: 'capture' }`). */
  errors(): string {
    return this.stderr;
  }

  /** The journal lines it logged (Powertools JSON, `message: "journal"`), in order. */
  journal(): JournalEntry[] {
    return parseJournal(this.text());
  }

  /**
   * Resolves once its output matches `pattern` (its "ready" line); rejects if it exits first or
   * after `timeoutMs` (default: no limit). Captured output is checked as it arrives, a log file
   * every `pollMs` (default 100).
   */
  async waitFor(
    pattern: RegExp,
    options: { timeoutMs?: number; pollMs?: number } = {},
  ): Promise<void> {
    const matches = () => this.text().search(pattern) !== -1;
    if (matches()) return;
    const timeoutMs = options.timeoutMs ?? Number.POSITIVE_INFINITY;
    await new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      let poll: NodeJS.Timeout | undefined;
      const finish = (err?: Error) => {
        this.watchers.delete(check);
        if (timer) clearTimeout(timer);
        if (poll) clearInterval(poll);
        if (err) reject(err);
        else resolve();
      };
      const check = () => {
        if (matches()) return finish();
        if (this.exit) {
          const how = this.exit.code ?? this.exit.signal;
          finish(new Error(`${this.name} exited (${how}) before ${pattern}${this.lastOutput()}`));
        }
      };
      this.watchers.add(check);
      if (this.logFile) {
        poll = setInterval(check, options.pollMs ?? 100);
        poll.unref();
      }
      if (Number.isFinite(timeoutMs)) {
        timer = setTimeout(
          () =>
            finish(
              new Error(`${this.name}: no ${pattern} within ${timeoutMs} ms${this.lastOutput()}`),
            ),
          timeoutMs,
        );
      }
      check();
    });
  }

  /** Sends `signal` if it is still running; false if it was not. */
  signal(signal: NodeJS.Signals): boolean {
    if (!this.running) return false;
    return this.child.kill(signal);
  }

  /** SIGKILL (a crash). */
  kill(): boolean {
    return this.signal('SIGKILL');
  }

  /** SIGTERM (in-flight work finishes), SIGKILL after `graceMs`; then removes the log if asked. */
  async stop(graceMs = 5_000): Promise<ProcessExit> {
    if (this.signal('SIGTERM')) {
      const timer = setTimeout(() => this.signal('SIGKILL'), graceMs);
      await this.exited;
      clearTimeout(timer);
    }
    const exit = await this.exited;
    if (this.output?.removeOnStop && this.logFile) rmSync(this.logFile, { force: true });
    return exit;
  }

  private notify(): void {
    for (const w of [...this.watchers]) w();
  }

  private lastOutput(): string {
    const out = this.text().slice(-2_000);
    const err = this.logFile && this.output?.stderr !== 'capture' ? '' : this.stderr.slice(-2_000);
    return `${out ? `\n--- output:\n${out}` : ''}${err ? `\n--- stderr:\n${err}` : ''}`;
  }
}

/**
 * A log line as a journal entry (`{"message":"journal","journal":{…}}`, Powertools JSON: what the
 * consumer driver logs for each step), or undefined.
 */
export function journalEntryOf(line: string): JournalEntry | undefined {
  if (!line.startsWith('{') || !line.includes('"journal"')) return undefined;
  try {
    const parsed = JSON.parse(line) as { message?: string; journal?: JournalEntry };
    return parsed.message === 'journal' ? parsed.journal : undefined;
  } catch {
    return undefined; // not a log line, or one cut short by SIGKILL
  }
}

/** Journal lines out of a log's text, in order. */
export function parseJournal(text: string): JournalEntry[] {
  return text.split('\n').flatMap((line) => journalEntryOf(line) ?? []);
}

export interface Memory {
  /** Peak resident set size since the process started (VmHWM), MB. */
  peakMb: number;
  /** Current resident set size (VmRSS), MB. */
  rssMb: number;
}

/** A process's memory from /proc (Linux); undefined when it is gone or elsewhere. */
export async function readMemory(pid: number | undefined): Promise<Memory | undefined> {
  if (pid === undefined) return undefined;
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]);
    return {
      peakMb: Math.round(kb('VmHWM') / 102.4) / 10,
      rssMb: Math.round(kb('VmRSS') / 102.4) / 10,
    };
  } catch {
    return undefined;
  }
}

// ─── Supervision (the soak) ────────────────────────────────────────────────────────────────

/** How a supervised process ended (one incarnation). */
export interface Exit extends ProcessExit {
  role: string;
  incarnation: number;
  /** Killed by the controller (a fault it injected, or the shutdown). */
  byController: boolean;
  /** The fault point it died at (`FAULTS=point:exit`), if any. */
  faultPoint: string | undefined;
}

export interface ChildSpec {
  role: string;
  /** Arguments after `node`. */
  args: string[];
  env: Record<string, string>;
  /** Output that means "ready" (awaited after each start). */
  ready?: RegExp;
}

/**
 * One process kept running by a supervisor, as a process manager (or Lambda) would: when it dies
 * it is started again after `restartDelayMs`. Each incarnation writes stdout and stderr to its own
 * log file (read back for journal lines and exit reasons). The controller can SIGKILL it at any
 * moment, or arm a fault point for the next incarnation only.
 */
export class Supervised {
  private process: NodeProcess | undefined;
  private incarnation = 0;
  private stopping = false;
  private killedByController = false;
  private nextFaults = '';
  private armed = '';
  private readyWaiters: (() => void)[] = [];
  private restartAfterMs: number | undefined;
  private isReady = false;
  readonly exits: Exit[] = [];
  readonly logs: string[] = [];

  constructor(
    private readonly spec: ChildSpec,
    private readonly options: { logDir: string; restartDelayMs: number },
  ) {}

  get role(): string {
    return this.spec.role;
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
    this.armed = this.nextFaults;
    this.nextFaults = '';
    this.killedByController = false;
    this.isReady = false;
    const proc = new NodeProcess({
      name: `${this.spec.role}#${this.incarnation}`,
      args: this.spec.args,
      env: { ...this.spec.env, FAULTS: this.armed },
      output: { file: log },
    });
    this.process = proc;
    const incarnation = this.incarnation;
    if (this.spec.ready) {
      proc.waitFor(this.spec.ready, { pollMs: 100 }).then(
        () => {
          if (this.process === proc) this.markReady();
        },
        () => {}, // exited before it was ready: the next incarnation may be
      );
    } else this.markReady();
    void proc.exited.then(({ code, signal }) => {
      const fault = /FAULT ([a-z.-]+): exiting now/.exec(proc.text())?.[1];
      this.exits.push({
        role: this.spec.role,
        incarnation,
        code,
        signal,
        byController: this.killedByController,
        faultPoint: fault,
      });
      if (this.process === proc) this.process = undefined;
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

  /** Resolves when an incarnation is ready (or rejects after `timeoutMs`). */
  waitReady(timeoutMs = 60_000): Promise<void> {
    if (this.isReady) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const last = this.logs.at(-1);
        reject(
          new Error(
            `${this.spec.role} not ready within ${timeoutMs} ms; last log ${last}:\n${last ? readOrEmpty(last).slice(-2000) : ''}`,
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
    if (!this.process?.running) return false;
    this.killedByController = true;
    this.restartAfterMs = options.restartAfterMs;
    return this.process.kill();
  }

  /** Stops for good: SIGTERM (in-flight work finishes), SIGKILL after `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    this.stopping = true;
    const proc = this.process;
    if (!proc?.running) return;
    this.killedByController = true;
    await proc.stop(graceMs);
  }

  /** Every incarnation's log, concatenated. */
  readAllLogs(): string {
    return this.logs.map(readOrEmpty).join('\n');
  }
}

/** A file's text, or '' when it cannot be read (not written yet, removed). */
export function readOrEmpty(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}
