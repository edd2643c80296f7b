import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Calls by operation (`rds-data:ExecuteStatement`, `sqs:SendMessageBatch`, …), and their time. */
export interface CallLog {
  counts(): Record<string, number>;
  /** Epoch ms of every call of a service (`rds-data`), in order. */
  times(service: string): number[];
  reset(): void;
}

export interface CountingProxy {
  endpoint: string;
  close(): Promise<void>;
}

/**
 * The operation an AWS SDK request names: the JSON protocols' `X-Amz-Target` (`AmazonSQS.SendMessage`,
 * `AmazonSSM.GetParameter`), the query protocol's `Action`, or the REST path (the Data API's
 * `/Execute`, `/BeginTransaction`; Lambda's `…/invocations` → `Invoke`).
 */
export function operationOf(path: string, target: string | undefined, body: string): string {
  if (target) return target.split('.').pop() as string;
  if (/\/invocations$/.test(path)) return 'Invoke';
  const action = /(?:^|&)Action=([A-Za-z]+)/.exec(body)?.[1];
  if (action) return action;
  return path.replace(/^\//, '').split(/[/?]/)[0] || 'unknown';
}

/** One shared log for several proxies. */
export function callLog(): CallLog & { record(service: string, op: string): void } {
  let counts: Record<string, number> = {};
  let times = new Map<string, number[]>();
  return {
    record(service, op) {
      const key = `${service}:${op}`;
      counts[key] = (counts[key] ?? 0) + 1;
      let t = times.get(service);
      if (!t) {
        t = [];
        times.set(service, t);
      }
      t.push(Date.now());
    },
    counts: () => ({ ...counts }),
    times: (service) => [...(times.get(service) ?? [])],
    reset() {
      counts = {};
      times = new Map();
    },
  };
}

/**
 * An HTTP reverse proxy in front of a local AWS endpoint that records each request the clients
 * send (the calls AWS would bill), by service and operation. Requests and responses pass through
 * unchanged.
 */
export async function startCountingProxy(
  targetUrl: string,
  service: string,
  log: ReturnType<typeof callLog>,
): Promise<CountingProxy> {
  const target = new URL(targetUrl);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const amzTarget = req.headers['x-amz-target'];
      log.record(
        service,
        operationOf(
          req.url ?? '/',
          Array.isArray(amzTarget) ? amzTarget[0] : amzTarget,
          body.toString('utf8', 0, Math.min(body.length, 512)),
        ),
      );
      const upstream = request(
        {
          hostname: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, host: target.host },
        },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      upstream.on('error', (err) => {
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(String(err));
      });
      upstream.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
