import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import pg from 'pg';
import {
  type FallbackResult,
  managementOverview,
  startFallbackContainers,
  waitForManagement,
} from './containers.js';

/**
 * Checks that the services a local command needs answer, and says which one does not and how to
 * start it: one clear line instead of a stack trace.
 */
export interface ServiceProblem {
  service: 'PostgreSQL' | 'RabbitMQ' | 'RabbitMQ management API';
  address: string;
  hint: string;
  error: string;
}

const HINTS = {
  PostgreSQL:
    'start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start',
  RabbitMQ: 'start it with: rabbitmq-server -detached && rabbitmqctl await_startup',
  'RabbitMQ management API': 'enable it with: rabbitmq-plugins enable rabbitmq_management',
} as const;

const problem = (service: ServiceProblem['service'], address: string, err: unknown) => ({
  service,
  address,
  hint: HINTS[service],
  error: (err as Error).message,
});

function tcpProbe(host: string, port: number, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.end();
      resolve();
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** How long a service has to answer a check. */
const CHECK_TIMEOUT_MS = 3_000;

export async function checkPostgres(url: string): Promise<ServiceProblem | undefined> {
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: CHECK_TIMEOUT_MS,
  });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return undefined;
  } catch (err) {
    const u = new URL(url);
    return problem('PostgreSQL', `${u.hostname}:${u.port || 5432}${u.pathname}`, err);
  } finally {
    await client.end().catch(() => {});
  }
}

export async function checkRabbitMq(url: string): Promise<ServiceProblem | undefined> {
  const u = new URL(url);
  const port = Number(u.port || (u.protocol === 'amqps:' ? 5671 : 5672));
  try {
    await tcpProbe(u.hostname, port, CHECK_TIMEOUT_MS);
    return undefined;
  } catch (err) {
    return problem('RabbitMQ', `${u.hostname}:${port}`, err);
  }
}

export async function checkRabbitManagement(
  url: string,
  timeoutMs = CHECK_TIMEOUT_MS,
): Promise<ServiceProblem | undefined> {
  try {
    const res = await managementOverview(url, timeoutMs);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    return undefined;
  } catch (err) {
    return problem('RabbitMQ management API', new URL(url).host, err);
  }
}

export function describeProblem(p: ServiceProblem): string {
  return `${p.service} is not reachable at ${p.address} (${p.error}); ${p.hint}`;
}

/** Runs a command (no shell) and collects its output; `error` is set when it could not run at all. */
export type CommandRunner = (
  command: string,
  args: string[],
  timeoutMs: number,
) => Promise<{ status: number | null; stdout: string; stderr: string; error?: string }>;

export const runCommand: CommandRunner = (command, args, timeoutMs) =>
  new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.on('error', (err) => resolve({ status: null, stdout, stderr, error: err.message }));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

export interface EnableManagementDeps {
  run: CommandRunner;
  waitManagement(url: string, timeoutMs: number): Promise<void>;
  log(line: string): void;
}

/**
 * Turns the management plugin on when the broker at `amqpUrl` is this machine's own node (loopback
 * address, and the node that `rabbitmq-diagnostics` reaches listens for AMQP on that port), then
 * waits until the API at `managementUrl` answers. Says so in one line. Returns why not otherwise:
 * a remote broker, a broker of another node on this machine (a container), no RabbitMQ tools, or
 * no permission to use them (the Erlang cookie).
 */
export async function enableLocalManagement(
  amqpUrl: string,
  managementUrl: string,
  deps: EnableManagementDeps = {
    run: runCommand,
    waitManagement: waitForManagement,
    log: (line) => console.log(line),
  },
): Promise<{ enabled: true } | { reason: string }> {
  const amqp = new URL(amqpUrl);
  const port = Number(amqp.port || (amqp.protocol === 'amqps:' ? 5671 : 5672));
  if (!LOOPBACK.has(amqp.hostname) || !LOOPBACK.has(new URL(managementUrl).hostname)) {
    return { reason: 'the broker is not on this machine' };
  }
  const listeners = await deps.run('rabbitmq-diagnostics', ['-q', 'listeners'], 30_000);
  if (listeners.error) return { reason: `no RabbitMQ tools here (${listeners.error})` };
  if (listeners.status !== 0) {
    return { reason: `rabbitmq-diagnostics failed: ${firstLineOf(listeners.stderr)}` };
  }
  const ownsPort = listeners.stdout
    .split('\n')
    .some((l) => new RegExp(`port: ${port}, protocol: amqp\\b`).test(l));
  if (!ownsPort) {
    return { reason: `the local node does not listen for AMQP on port ${port}` };
  }
  const enabled = await deps.run(
    'rabbitmq-plugins',
    ['-q', 'enable', 'rabbitmq_management'],
    60_000,
  );
  if (enabled.status !== 0) {
    return {
      reason: `rabbitmq-plugins enable failed: ${firstLineOf(enabled.stderr || enabled.error || '')}`,
    };
  }
  deps.log(
    `RabbitMQ's management plugin was off on the local broker: turned it on (rabbitmq-plugins enable rabbitmq_management)`,
  );
  try {
    await deps.waitManagement(managementUrl, 30_000);
  } catch (err) {
    return { reason: (err as Error).message };
  }
  return { enabled: true };
}

const firstLineOf = (text: string) => text.trim().split('\n')[0] ?? '';

export interface ServiceUrls {
  databaseUrl: string;
  amqpUrl: string;
  managementUrl: string;
}

export interface EnsuredServices extends ServiceUrls {
  /** Set when a service does not answer and could not be made to: one line each. */
  problems: string[];
  /** Stops what was started here (containers). */
  stop(): Promise<void>;
}

export interface EnsureDeps {
  checkPostgres(url: string): Promise<ServiceProblem | undefined>;
  checkRabbitMq(url: string): Promise<ServiceProblem | undefined>;
  checkRabbitManagement(url: string): Promise<ServiceProblem | undefined>;
  enableManagement(
    amqpUrl: string,
    managementUrl: string,
  ): Promise<{ enabled: true } | { reason: string }>;
  /** `false`: no container fallback (the services must be the configured ones). */
  startContainers:
    | ((needs: { postgres: boolean; rabbitmq: boolean }) => Promise<FallbackResult>)
    | false;
  log(line: string): void;
}

export const defaultEnsureDeps: EnsureDeps = {
  checkPostgres,
  checkRabbitMq,
  checkRabbitManagement,
  enableManagement: (amqpUrl, managementUrl) => enableLocalManagement(amqpUrl, managementUrl),
  startContainers: startFallbackContainers,
  log: (line) => console.log(line),
};

/**
 * Makes sure PostgreSQL and RabbitMQ with its management API answer, as `npm test` and
 * `npm start` need them:
 * 1. the management plugin of a local broker that has it off is turned on (one line);
 * 2. a service that still does not answer (PostgreSQL; RabbitMQ, or its management API where it
 *    cannot be turned on) is started in a container when an engine can (one line each), on the
 *    image `devkit/containers.ts` picks, never pulled where no registry answers;
 * 3. what is left is in `problems`, one line each: the service, where, why, how to start it.
 */
export async function ensureServices(
  urls: ServiceUrls,
  deps: EnsureDeps = defaultEnsureDeps,
): Promise<EnsuredServices> {
  const out: EnsuredServices = { ...urls, problems: [], stop: async () => {} };
  const pgProblem = await deps.checkPostgres(urls.databaseUrl);
  let rabbitProblem = await deps.checkRabbitMq(urls.amqpUrl);
  if (!rabbitProblem) {
    const managementProblem = await deps.checkRabbitManagement(urls.managementUrl);
    if (managementProblem) {
      const enabled = await deps.enableManagement(urls.amqpUrl, urls.managementUrl);
      if ('reason' in enabled) {
        rabbitProblem = {
          ...managementProblem,
          error: `${managementProblem.error}; not turned on here: ${enabled.reason}`,
        };
      }
    }
  }
  const problems = [pgProblem, rabbitProblem].filter((p): p is ServiceProblem => p !== undefined);
  if (problems.length === 0) return out;
  if (!deps.startContainers) {
    out.problems = problems.map(describeProblem);
    return out;
  }
  const fallback = await deps.startContainers({
    postgres: pgProblem !== undefined,
    rabbitmq: rabbitProblem !== undefined,
  });
  out.stop = fallback.stop;
  if (fallback.databaseUrl) out.databaseUrl = fallback.databaseUrl;
  if (fallback.amqpUrl && fallback.managementUrl) {
    out.amqpUrl = fallback.amqpUrl;
    out.managementUrl = fallback.managementUrl;
  }
  for (const line of fallback.started) {
    deps.log(`not answering, started in a container instead: ${line}`);
  }
  for (const { service, reason } of fallback.notStarted) {
    const problem = service === 'PostgreSQL' ? pgProblem : rabbitProblem;
    if (problem) out.problems.push(`${describeProblem(problem)} (no container either: ${reason})`);
  }
  return out;
}

export interface RequiredServices {
  postgres?: string;
  rabbitmq?: string;
  rabbitManagement?: string;
}

/**
 * Checks every named service; if one does not answer, prints one line per problem (which service,
 * where, how to start it) and exits with status 2. Command-line entry points call this first.
 * A local broker's management plugin that is off is turned on (one line); nothing is started in
 * a container here (`ensureServices` does that for the lab and the tests).
 */
export async function requireServices(required: RequiredServices): Promise<void> {
  const rabbit = required.rabbitmq ? await checkRabbitMq(required.rabbitmq) : undefined;
  // the management API is only worth checking when the broker itself answers
  let management =
    required.rabbitManagement && !rabbit
      ? await checkRabbitManagement(required.rabbitManagement)
      : undefined;
  if (management && required.rabbitmq && required.rabbitManagement) {
    const enabled = await enableLocalManagement(required.rabbitmq, required.rabbitManagement);
    if (!('reason' in enabled)) management = undefined;
  }
  const problems = [
    required.postgres ? await checkPostgres(required.postgres) : undefined,
    rabbit,
    management,
  ].filter((p): p is ServiceProblem => p !== undefined);
  if (problems.length === 0) return;
  for (const p of problems) console.error(describeProblem(p));
  process.exit(2);
}
