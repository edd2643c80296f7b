import { templatesFor } from '../../devkit/lambda/synth.js';
import { NodeProcess } from '../../devkit/processes.js';
import { localTransport } from '../../devkit/transports/index.js';
import type { JournalEntry } from '../../shared/index.js';
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
 * Makes (or finds cached) the synthesized templates `npm run dev` reads its settings from, so that
 * a test file's first dev process does not synthesize inside a test's timeout: call it in a
 * `beforeAll` with a long timeout (a synth takes 10–30 s on these machines, once per source change).
 */
export const DEV_TEMPLATES_TIMEOUT_MS = 240_000;
export async function devTemplates(...transports: ('sqs' | 'rabbitmq')[]): Promise<void> {
  for (const transport of transports) await templatesFor({ transport });
}

/**
 * The templates dev reads its settings from: those of the stacks that deploy the transport of
 * `args` (dev's default: RabbitMQ); none for a transport no stack deploys.
 */
async function templatesOf(args: string[]): Promise<void> {
  const at = args.indexOf('--transport');
  const deployed = localTransport(at >= 0 ? (args[at + 1] ?? '') : 'rabbitmq').deployed;
  if (deployed) await templatesFor({ transport: deployed.stack });
}

/**
 * Runs `npm run dev` roles in a child process, as a separate deployment would; `done` resolves when
 * it exits (tests use `FAULTS=…:exit` to make it die at a fault point). dev reads its settings
 * from the synthesized templates: they are made (or found cached) here first, so that the
 * child's start and the timeouts below do not include a synth.
 */
export function startDev(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 30_000,
): RunningChild {
  const started = templatesOf(args).then(
    () =>
      new NodeProcess({
        name: `dev ${args.join(' ')}`,
        args: ['--import', 'tsx', 'bin/dev.ts', ...args],
        env: {
          RABBITMQ_MANAGEMENT_URL,
          POWERTOOLS_LOG_LEVEL: 'INFO',
          RETRY_LADDER_MS: '1000,2000,3000',
          RETRY_MAX_ATTEMPTS: '3',
          RETRY_MAX_AGE_MS: '60000',
          RETRY_JITTER: '0',
          ...env,
        },
      }),
  );
  const done = started.then(
    (child) =>
      new Promise<ChildResult>((resolve, reject) => {
        const timer = setTimeout(() => {
          child.kill();
          reject(
            new Error(
              `child did not exit within ${timeoutMs} ms\nstdout: ${child.text()}\nstderr: ${child.errors()}`,
            ),
          );
        }, timeoutMs);
        void child.exited.then(({ code, signal }) => {
          clearTimeout(timer);
          resolve({
            code,
            signal,
            stdout: child.text(),
            stderr: child.errors(),
            journal: child.journal(),
          });
        });
      }),
  );
  const output = async (pattern: RegExp, waitMs = 20_000) =>
    (await started).waitFor(pattern, { timeoutMs: waitMs });
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
