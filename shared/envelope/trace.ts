import { randomBytes } from 'node:crypto';

/**
 * The trace id an event carries (envelope `trace_id`): the X-Ray trace id of the invocation that
 * produced it. Lambda sets `_X_AMZN_TRACE_ID` for each invocation (`Root=1-…;Parent=…;Sampled=…`);
 * its `Root` is the trace id. Where no Lambda runs (local runs, tests) one is made in the same
 * format (`1-<8 hex: epoch seconds>-<24 hex: random>`), so every event has one and a trace id
 * always looks the same. Events derived from another event (inventory's results) keep its trace id.
 */
export function currentTraceId(env: NodeJS.ProcessEnv = process.env): string {
  const root = /(?:^|;)\s*Root=(1-[0-9a-f]{8}-[0-9a-f]{24})/i.exec(env._X_AMZN_TRACE_ID ?? '');
  return root?.[1] ?? newTraceId();
}

/** A new trace id in X-Ray's format. */
export function newTraceId(now = Date.now()): string {
  const seconds = Math.floor(now / 1000)
    .toString(16)
    .padStart(8, '0');
  return `1-${seconds}-${randomBytes(12).toString('hex')}`;
}
