import { createServer, request } from 'node:http';
import { getOrSet } from '../maps.js';
import { closeServer, listen } from './httpApi.js';

/** Calls by operation (`rds-data:ExecuteStatement`, `sqs:SendMessageBatch`, …), and their time. */
export interface CallLog {
  counts(): Record<string, number>;
  /**
   * Billing units by operation: each call counts one per started 64 KiB of its larger payload
   * (request or response), as SQS bills requests (docs/aws-facts.md); other services bill per
   * call, for which this equals `counts` as long as payloads stay under 64 KiB.
   */
  units64k(): Record<string, number>;
  /** Bytes sent and received per service (what a NAT gateway would process). */
  bytes(): Record<string, { sent: number; received: number }>;
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
export function callLog(): CallLog & {
  record(service: string, op: string): void;
  payload(service: string, op: string, sent: number, received: number): void;
} {
  let counts: Record<string, number> = {};
  let units: Record<string, number> = {};
  let bytes: Record<string, { sent: number; received: number }> = {};
  let times = new Map<string, number[]>();
  return {
    payload(service, op, sent, received) {
      const key = `${service}:${op}`;
      units[key] = (units[key] ?? 0) + Math.max(1, Math.ceil(Math.max(sent, received) / 65_536));
      const b = bytes[service] ?? { sent: 0, received: 0 };
      b.sent += sent;
      b.received += received;
      bytes[service] = b;
    },
    record(service, op) {
      const key = `${service}:${op}`;
      counts[key] = (counts[key] ?? 0) + 1;
      getOrSet(times, service, () => []).push(Date.now());
    },
    counts: () => ({ ...counts }),
    units64k: () => ({ ...units }),
    bytes: () => structuredClone(bytes),
    times: (service) => [...(times.get(service) ?? [])],
    reset() {
      counts = {};
      units = {};
      bytes = {};
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
      const op = operationOf(
        req.url ?? '/',
        Array.isArray(amzTarget) ? amzTarget[0] : amzTarget,
        body.toString('utf8', 0, Math.min(body.length, 512)),
      );
      log.record(service, op);
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
          let received = 0;
          up.on('data', (c: Buffer) => {
            received += c.length;
          });
          up.on('end', () => log.payload(service, op, body.length, received));
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
  const { port } = await listen(server);
  return { endpoint: `http://127.0.0.1:${port}`, close: () => closeServer(server) };
}
