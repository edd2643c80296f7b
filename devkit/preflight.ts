import { connect } from 'node:net';
import pg from 'pg';

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

export async function checkPostgres(
  url: string,
  timeoutMs = 3_000,
): Promise<ServiceProblem | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return undefined;
  } catch (err) {
    const u = new URL(url);
    return {
      service: 'PostgreSQL',
      address: `${u.hostname}:${u.port || 5432}${u.pathname}`,
      hint: HINTS.PostgreSQL,
      error: (err as Error).message,
    };
  } finally {
    await client.end().catch(() => {});
  }
}

export async function checkRabbitMq(
  url: string,
  timeoutMs = 3_000,
): Promise<ServiceProblem | undefined> {
  const u = new URL(url);
  const port = Number(u.port || (u.protocol === 'amqps:' ? 5671 : 5672));
  try {
    await tcpProbe(u.hostname, port, timeoutMs);
    return undefined;
  } catch (err) {
    return {
      service: 'RabbitMQ',
      address: `${u.hostname}:${port}`,
      hint: HINTS.RabbitMQ,
      error: (err as Error).message,
    };
  }
}

export async function checkRabbitManagement(
  url: string,
  timeoutMs = 3_000,
): Promise<ServiceProblem | undefined> {
  const u = new URL(url);
  const auth = Buffer.from(
    `${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`,
  ).toString('base64');
  u.username = '';
  u.password = '';
  try {
    const res = await fetch(new URL('/api/overview', u), {
      headers: { authorization: `Basic ${auth}` },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    return undefined;
  } catch (err) {
    return {
      service: 'RabbitMQ management API',
      address: u.host,
      hint: HINTS['RabbitMQ management API'],
      error: (err as Error).message,
    };
  }
}

export function describeProblem(p: ServiceProblem): string {
  return `${p.service} is not reachable at ${p.address} (${p.error}); ${p.hint}`;
}

export interface RequiredServices {
  postgres?: string;
  rabbitmq?: string;
  rabbitManagement?: string;
}

/**
 * Checks every named service; if one does not answer, prints one line per problem (which service,
 * where, how to start it) and exits with status 2. Command-line entry points call this first.
 */
export async function requireServices(required: RequiredServices): Promise<void> {
  const rabbit = required.rabbitmq ? await checkRabbitMq(required.rabbitmq) : undefined;
  const problems = [
    required.postgres ? await checkPostgres(required.postgres) : undefined,
    rabbit,
    // the management API is only worth checking when the broker itself answers
    required.rabbitManagement && !rabbit
      ? await checkRabbitManagement(required.rabbitManagement)
      : undefined,
  ].filter((p): p is ServiceProblem => p !== undefined);
  if (problems.length === 0) return;
  for (const p of problems) console.error(describeProblem(p));
  process.exit(2);
}
