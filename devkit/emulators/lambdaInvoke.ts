import { createServer } from 'node:http';
import type { InvokeOutcome } from '../lambda/LambdaFunction.js';
import { getOrSet } from '../maps.js';
import { closeServer, listen, readBody } from './httpApi.js';

/** How a function is invoked asynchronously: its template's concurrency and EventInvokeConfig. */
export interface AsyncInvokeSettings {
  /** `ReservedConcurrentExecutions` (unset: no cap). */
  reservedConcurrency?: number | undefined;
  /** `MaximumEventAgeInSeconds` in ms (Lambda's default: 6 hours). */
  maxEventAgeMs?: number;
  /** `MaximumRetryAttempts` (Lambda's default: 2). */
  retryAttempts?: number;
}

export interface LambdaInvokeTarget {
  invoke(event: unknown): Promise<InvokeOutcome>;
  settings: AsyncInvokeSettings;
}

/** Per function: events accepted, run, dropped for age, and the longest an event waited (ms). */
export interface AsyncInvokeStats {
  accepted: number;
  invoked: number;
  errors: number;
  droppedForAge: number;
  maxQueuedMs: number;
}

export interface LambdaInvokeServer {
  endpoint: string;
  stats(name: string): AsyncInvokeStats;
  /** Resolves when no asynchronous event is queued or running. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A local endpoint for Lambda's `Invoke` (`POST /2015-03-31/functions/{name}/invocations`), so that
 * the deployed bundles' AWS SDK reaches the local functions (`AWS_ENDPOINT_URL_LAMBDA`).
 * `InvocationType: Event` answers 202 at once and queues the event, as Lambda does; events run in
 * order of arrival, at most `reservedConcurrency` at once (an event over it waits, as Lambda keeps
 * a throttled asynchronous event and retries it), an event older than `maxEventAgeMs` is dropped,
 * and a function error is retried `retryAttempts` times after 1 and 2 minutes (Lambda DG,
 * "Asynchronous invocation": "about one minute, then two"). `RequestResponse` runs at once and
 * answers the payload. Not reproduced: the queue's own delivery delay and duplicate deliveries.
 */
export async function startLambdaInvokeServer(
  resolve: (name: string) => LambdaInvokeTarget | undefined,
): Promise<LambdaInvokeServer> {
  const queues = new Map<
    string,
    {
      target: LambdaInvokeTarget;
      queue: { event: unknown; at: number; attempt: number }[];
      running: number;
    }
  >();
  const stats = new Map<string, AsyncInvokeStats>();
  const statsOf = (name: string) =>
    getOrSet(stats, name, () => ({
      accepted: 0,
      invoked: 0,
      errors: 0,
      droppedForAge: 0,
      maxQueuedMs: 0,
    }));
  let active = 0;
  let waiters: (() => void)[] = [];
  const settle = () => {
    if (active === 0) {
      for (const w of waiters) w();
      waiters = [];
    }
  };
  const timers = new Set<NodeJS.Timeout>();
  let closed = false;

  const pump = (name: string) => {
    const q = queues.get(name);
    if (!q || closed) return;
    const cap = q.target.settings.reservedConcurrency ?? Number.POSITIVE_INFINITY;
    while (q.running < cap && q.queue.length > 0) {
      const item = q.queue.shift() as { event: unknown; at: number; attempt: number };
      const s = statsOf(name);
      const waited = Date.now() - item.at;
      if (waited > (q.target.settings.maxEventAgeMs ?? 6 * 3600_000)) {
        s.droppedForAge++;
        active--;
        continue;
      }
      s.maxQueuedMs = Math.max(s.maxQueuedMs, waited);
      q.running++;
      s.invoked++;
      q.target
        .invoke(item.event)
        .then(
          (outcome) => outcome.ok,
          () => false,
        )
        .then((ok) => {
          q.running--;
          if (!ok) {
            s.errors++;
            if (item.attempt < (q.target.settings.retryAttempts ?? 2) && !closed) {
              const t = setTimeout(
                () => {
                  timers.delete(t);
                  q.queue.push({ ...item, attempt: item.attempt + 1 });
                  pump(name);
                },
                60_000 * (item.attempt + 1),
              );
              timers.add(t);
              pump(name);
              return;
            }
          }
          active--;
          pump(name);
          settle();
        });
    }
    settle();
  };

  const server = createServer(async (req, res) => {
    const m = /^\/2015-03-31\/functions\/([^/]+)\/invocations/.exec(req.url ?? '');
    const body = await readBody(req);
    const reply = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(payload === undefined ? '' : JSON.stringify(payload));
    };
    if (!m || req.method !== 'POST' || body === 'too-large') {
      reply(400, { message: 'not a Lambda Invoke request' });
      return;
    }
    // a name, a partial or a full ARN (`…:function:name[:qualifier]`)
    const raw = decodeURIComponent(m[1] as string);
    const name = raw.includes(':function:')
      ? (raw.split(':function:')[1]?.split(':')[0] as string)
      : raw;
    const target = resolve(name);
    if (!target) {
      reply(
        404,
        { Type: 'User', message: `Function not found: ${raw}` },
        {
          'x-amzn-errortype': 'ResourceNotFoundException',
        },
      );
      return;
    }
    const event = body.length ? JSON.parse(body.toString('utf8')) : {};
    const type = String(req.headers['x-amz-invocation-type'] ?? 'RequestResponse');
    if (type === 'DryRun') {
      reply(204, undefined);
      return;
    }
    if (type === 'Event') {
      const q = getOrSet(queues, name, () => ({ target, queue: [], running: 0 }));
      statsOf(name).accepted++;
      active++;
      q.queue.push({ event, at: Date.now(), attempt: 0 });
      reply(202, undefined);
      pump(name);
      return;
    }
    const outcome = await target.invoke(event);
    if (outcome.ok) reply(200, outcome.payload);
    else reply(200, outcome.error, { 'x-amz-function-error': 'Unhandled' });
  });
  const { port } = await listen(server);
  return {
    endpoint: `http://127.0.0.1:${port}`,
    stats: (name) => ({ ...statsOf(name) }),
    idle: () => (active === 0 ? Promise.resolve() : new Promise<void>((r) => waiters.push(r))),
    close: async () => {
      closed = true;
      for (const t of timers) clearTimeout(t);
      await closeServer(server);
    },
  };
}
