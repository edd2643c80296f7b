import { spawn } from 'node:child_process';
import type { JournalEntry } from '../../shared/consumer/journal.js';
import { RABBITMQ_MANAGEMENT_URL } from './services.js';

export interface ChildResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Journal lines the child logged (Powertools JSON on stdout), in order. */
  journal: JournalEntry[];
}

export interface RunningChild {
  done: Promise<ChildResult>;
  /** Resolves once the child printed a line matching `pattern` (e.g. its "ready" line). */
  output(pattern: RegExp, timeoutMs?: number): Promise<void>;
}

/**
 * Runs `npm run dev` roles in a child process, as a separate deployment would; `done` resolves when
 * it exits (tests use `FAULTS=…:exit` to make it die at a fault point).
 */
export function startDev(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 30_000,
): RunningChild {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bin/dev.ts', ...args], {
    env: {
      ...process.env,
      RABBITMQ_MANAGEMENT_URL,
      POWERTOOLS_LOG_LEVEL: 'INFO',
      RETRY_LADDER_MS: '1000,2000,3000',
      RETRY_MAX_ATTEMPTS: '3',
      RETRY_MAX_AGE_MS: '60000',
      RETRY_JITTER: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += d;
  });
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  const done = new Promise<ChildResult>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(
          `child did not exit within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`,
        ),
      );
    }, timeoutMs);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      const journal: JournalEntry[] = [];
      for (const line of stdout.split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const parsed = JSON.parse(line) as { message?: string; journal?: JournalEntry };
          if (parsed.message === 'journal' && parsed.journal) journal.push(parsed.journal);
        } catch {
          // not a log line
        }
      }
      resolve({ code, signal, stdout, stderr, journal });
    });
  });
  const output = (pattern: RegExp, waitMs = 20_000) =>
    new Promise<void>((resolve, reject) => {
      if (pattern.test(stdout)) return resolve();
      const timer = setTimeout(
        () => reject(new Error(`no ${pattern} in the child's output:\n${stdout}\n${stderr}`)),
        waitMs,
      );
      const check = () => {
        if (pattern.test(stdout)) {
          clearTimeout(timer);
          child.stdout.off('data', check);
          resolve();
        }
      };
      child.stdout.on('data', check);
      void done.then(
        () => check(),
        () => {},
      );
    });
  return { done, output };
}

/** Runs a dev role until it exits. */
export function runDev(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 30_000,
): Promise<ChildResult> {
  return startDev(args, env, timeoutMs).done;
}
