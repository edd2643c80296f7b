import { Agent, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';

/** Value at quantile `q` (0…1) of a sorted array (nearest rank). */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

/** `fn`, at most `max` calls of it running at once (the others wait their turn, in order). */
export function atMost<A extends unknown[], T>(
  max: number,
  fn: (...args: A) => Promise<T>,
): (...args: A) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (...args) => {
    while (running >= max) await new Promise<void>((r) => waiting.push(r));
    running++;
    try {
      return await fn(...args);
    } finally {
      running--;
      waiting.shift()?.();
    }
  };
}

/**
 * `round(rate × seconds)` calls of `place(i)`, due at `rate` per second from the start whatever
 * the earlier ones are doing; their results, and the seconds the sending took.
 */
export async function offerAtRate<T>(
  place: (i: number) => Promise<T>,
  rate: number,
  seconds: number,
): Promise<{ results: T[]; sendSeconds: number }> {
  const started = Date.now();
  const pending: Promise<T>[] = [];
  const total = Math.round(rate * seconds);
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((Date.now() - started) / 1000) * rate));
    while (sent < due) pending.push(place(sent++));
    await sleep(20);
  }
  const sendSeconds = (Date.now() - started) / 1000;
  return { results: await Promise.all(pending), sendSeconds };
}

/** `n` rounded to `digits` decimals. */
export const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits;
export const round1 = (n: number) => Math.round(n * 10) / 10;
export const round2 = (n: number) => Math.round(n * 100) / 100;

export interface FixedRateOptions {
  url: string;
  /** Requests per second, spread evenly (one every 1/rate s). */
  rate: number;
  durationMs: number;
  body: (i: number) => string;
  /** Requests outstanding at most; a request due while that many are open is counted as missed. */
  maxInFlight?: number;
  /** Called about once per second while running. */
  onSecond?: (sent: number, ok: number) => void;
}

export interface FixedRateResult {
  rate: number;
  durationMs: number;
  sent: number;
  ok: number;
  /** Non-2xx answers and transport errors. */
  failed: number;
  /** Due while `maxInFlight` requests were open: never sent. */
  missed: number;
  /** 2xx answers per second, over the time from the first send to the last answer. */
  achieved: number;
  /** From the time a request was due (not when it was sent: no coordinated omission), ms. */
  latencyMs: { p50: number; p99: number; max: number };
  /** Failures by cause (status or error message), most frequent first. */
  errors?: Record<string, number>;
}

/**
 * An open-loop generator: request i is due at start + i/rate whatever happened to earlier ones,
 * so a slow server meets the same arrival rate (autocannon's `overallRate` instead refills a
 * per-connection budget once a second, which sends each second's requests as a burst).
 */
export async function fixedRateLoad(o: FixedRateOptions): Promise<FixedRateResult> {
  const url = new URL(o.url);
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const maxInFlight = o.maxInFlight ?? 2_000;
  const total = Math.round((o.rate * o.durationMs) / 1000);
  const latencies: number[] = [];
  let sent = 0;
  let ok = 0;
  let failed = 0;
  let missed = 0;
  let inFlight = 0;
  let lastAnswer = 0;
  const errors = new Map<string, number>();
  let allAnswered: (() => void) | undefined;
  const fail = (msg: string) => {
    failed++;
    errors.set(msg, (errors.get(msg) ?? 0) + 1);
  };

  const send = (i: number, dueAt: number) => {
    const body = o.body(i);
    sent++;
    inFlight++;
    const done = (status: number | undefined, err?: string) => {
      const now = performance.now();
      lastAnswer = now;
      inFlight--;
      if (status !== undefined && status >= 200 && status < 300) {
        ok++;
        latencies.push(now - dueAt);
      } else fail(err ?? `HTTP ${status}`);
      if (inFlight === 0) allAnswered?.();
    };
    const req = request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => done(res.statusCode));
        res.on('error', (e) => done(undefined, e.message));
      },
    );
    req.on('error', (e) => done(undefined, e.message));
    req.end(body);
  };

  const started = performance.now();
  let next = 0;
  let lastTick = started;
  while (next < total) {
    const now = performance.now();
    const due = Math.min(total, Math.floor(((now - started) * o.rate) / 1000) + 1);
    for (; next < due; next++) {
      if (inFlight >= maxInFlight) missed++;
      else send(next, started + (next * 1000) / o.rate);
    }
    if (now - lastTick >= 1000) {
      lastTick = now;
      o.onSecond?.(sent, ok);
    }
    await sleep(Math.max(1, Math.min(5, 1000 / o.rate)));
  }
  if (inFlight > 0) {
    const timeout = new AbortController();
    await Promise.race([
      new Promise<void>((r) => (allAnswered = r)),
      sleep(30_000, undefined, { signal: timeout.signal }).then(
        () => {
          failed += inFlight;
          errors.set('unanswered after 30 s', inFlight);
        },
        () => {},
      ),
    ]);
    timeout.abort();
  }
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const span = Math.max(1, (lastAnswer || performance.now()) - started);
  return {
    rate: o.rate,
    durationMs: o.durationMs,
    sent,
    ok,
    failed,
    missed,
    achieved: round1((ok * 1000) / span),
    latencyMs: {
      p50: round1(quantile(latencies, 0.5)),
      p99: round1(quantile(latencies, 0.99)),
      max: round1(latencies.at(-1) ?? Number.NaN),
    },
    ...(errors.size
      ? { errors: Object.fromEntries([...errors].sort((a, b) => b[1] - a[1]).slice(0, 5)) }
      : {}),
  };
}

/** Closed-loop saturation (autocannon): how many requests per second the server answers at most. */
export async function maxThroughput(o: {
  url: string;
  body: string;
  seconds: number;
  connections: number;
}): Promise<{ rps: number; p50: number; p99: number; non2xx: number; errors: number }> {
  const result = await autocannon({
    url: o.url,
    method: 'POST',
    body: o.body,
    headers: { 'content-type': 'application/json' },
    duration: o.seconds,
    connections: o.connections,
  });
  return {
    rps: round1(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}
