import { LambdaClient } from '@aws-sdk/client-lambda';
import middy from '@middy/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type LambdaInvokeServer,
  startLambdaInvokeServer,
} from '../../devkit/emulators/lambdaInvoke.js';
import { isKickEvent, LambdaOutboxKick, outboxKick, sweepDue } from '../../shared/index.js';
import { KICK_SOURCE } from '../../shared/outbox/kick.js';
import { parseRelayState } from '../../shared/outbox/relayState.js';

const MIN = 60_000;
const policy = { quietMs: 10 * MIN, intervalMs: 60 * MIN };

describe('when a scheduled tick sweeps the outboxes', () => {
  const now = Date.parse('2026-12-02T12:00:00Z');
  it('at once when nothing is known or rows were left', () => {
    expect(sweepDue(undefined, now, policy)).toBe(true);
    expect(sweepDue({ lastCheckAt: now, lastActivityAt: now, pending: true }, now, policy)).toBe(
      true,
    );
  });
  it('not while orders flow, nor within the quiet period after the last kicked run', () => {
    const s = { lastCheckAt: now - 2 * 60 * MIN, lastActivityAt: now - 9 * MIN, pending: false };
    expect(sweepDue(s, now, policy)).toBe(false);
  });
  it('not within the interval after the last look, even when quiet', () => {
    const s = { lastCheckAt: now - 59 * MIN, lastActivityAt: now - 59 * MIN, pending: false };
    expect(sweepDue(s, now, policy)).toBe(false);
  });
  it('once quiet and the last look is an interval old', () => {
    const s = { lastCheckAt: now - 60 * MIN, lastActivityAt: now - 60 * MIN, pending: false };
    expect(sweepDue(s, now, policy)).toBe(true);
  });
  it("the stack's initial value and a damaged one are no state (a sweep)", () => {
    expect(parseRelayState('{}')).toBeUndefined();
    expect(parseRelayState('not json')).toBeUndefined();
    expect(parseRelayState('{"lastCheckAt":1,"lastActivityAt":2,"pending":false}')).toEqual({
      lastCheckAt: 1,
      lastActivityAt: 2,
      pending: false,
    });
  });
});

describe('the relay kick (Lambda Invoke, InvocationType Event, on the local endpoint)', () => {
  let server: LambdaInvokeServer;
  let client: LambdaClient;
  const received: unknown[] = [];
  let failing = false;

  beforeAll(async () => {
    server = await startLambdaInvokeServer((name) =>
      name === 'relay'
        ? {
            settings: { reservedConcurrency: 1, retryAttempts: 0 },
            invoke: async (event) => {
              received.push(event);
              return failing
                ? {
                    requestId: 'r',
                    coldStart: false,
                    durationMs: 1,
                    ok: false,
                    error: { errorType: 'Error', errorMessage: 'boom', trace: [] },
                  }
                : { requestId: 'r', coldStart: false, durationMs: 1, ok: true, payload: null };
            },
          }
        : undefined,
    );
    client = new LambdaClient({
      region: 'us-east-1',
      endpoint: server.endpoint,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
  });
  afterAll(async () => {
    client?.destroy();
    await server?.close();
  });

  it('sends one asynchronous invocation per interval from a container; the others are skipped', async () => {
    const kick = new LambdaOutboxKick(
      { client },
      { functionName: 'relay', from: 'place-order', minIntervalMs: 60_000 },
    );
    await kick.kick();
    await kick.kick();
    await kick.kick();
    await server.idle();
    expect(kick.stats).toEqual({ sent: 1, skipped: 2, failed: 0 });
    expect(server.stats('relay')).toMatchObject({ accepted: 1, invoked: 1 });
    expect(received.at(-1)).toEqual({ source: KICK_SOURCE, from: 'place-order' });
    expect(isKickEvent(received.at(-1))).toBe(true);
  });

  it('never throws: an unknown function is a failed kick, and the next one may go at once', async () => {
    const kick = new LambdaOutboxKick(
      { client },
      { functionName: 'no-such-function', from: 'place-order', minIntervalMs: 60_000 },
    );
    await kick.kick();
    await kick.kick();
    expect(kick.stats).toEqual({ sent: 0, skipped: 0, failed: 2 });
  });

  it('a function error is not the kicker’s: the event was accepted (202), Lambda runs it later', async () => {
    failing = true;
    try {
      const kick = new LambdaOutboxKick(
        { client },
        { functionName: 'relay', from: 'reserve', minIntervalMs: 0 },
      );
      await kick.kick();
      await server.idle();
      expect(kick.stats.sent).toBe(1);
      expect(server.stats('relay').errors).toBeGreaterThanOrEqual(1);
    } finally {
      failing = false;
    }
  });

  it('the middleware kicks after the handler, on errors too, only when its condition holds', async () => {
    const kicks: string[] = [];
    const kick = { kick: async () => void kicks.push('kick') };
    const handler = middy<{ method: string }, { statusCode: number }>()
      .use(
        outboxKick<{ method: string }, { statusCode: number }>({
          kick,
          when: ({ event }) => event.method === 'POST',
        }),
      )
      .handler(async (event) => {
        if (event.method === 'PUT') throw new Error('failed part-way');
        return { statusCode: 201 };
      });
    const ctx = {} as never;
    await handler({ method: 'POST' }, ctx);
    await handler({ method: 'GET' }, ctx);
    expect(kicks).toEqual(['kick']);
    const always = middy<{ method: string }, { statusCode: number }>()
      .use(outboxKick({ kick }))
      .handler(async () => {
        throw new Error('failed part-way');
      });
    await expect(always({ method: 'PUT' }, ctx)).rejects.toThrow('failed part-way');
    expect(kicks).toEqual(['kick', 'kick']);
  });
});
