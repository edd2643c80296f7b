import { describe, expect, it } from 'vitest';
import { FaultScope } from '../../shared/config/faults.js';
import type {
  Delivery,
  Diagnosis,
  InboundMessage,
  MessageHandler,
  Outcome,
  ParkOutcome,
  RetryRequest,
  Settle,
  Settled,
} from '../../shared/index.js';
import { ConsumerDriver, Journal, type JournalEntry } from '../../shared/index.js';

const NOW = new Date('2026-03-01T12:00:00.000Z');

const message = (id: string, patch: Partial<InboundMessage> = {}): InboundMessage => ({
  messageId: id,
  body: Buffer.from(JSON.stringify({ id, type: 'order.created', schema_version: '1.0' })),
  attempt: 0,
  redelivered: false,
  type: 'order.created',
  schemaVersion: '1.0',
  correlationId: `corr-${id}`,
  ...patch,
});
const deliveries = (...ids: string[]): Delivery[] => ids.map((id) => ({ message: message(id) }));

const ack: Outcome = { kind: 'ack', result: 'reserved' };
const retry = (infrastructure = false): Outcome => ({
  kind: 'retry',
  delayMs: 1_000,
  attempt: 1,
  errorClass: 'transient',
  error: infrastructure ? 'TransientDbError: connection refused' : 'TransientDbError: deadlock',
  infrastructure,
});
const park: ParkOutcome = {
  kind: 'park',
  reason: 'permanent',
  errorClass: 'permanent',
  error: 'body: not valid JSON',
};

/**
 * A stub of the settle contract that writes every call to one log, next to the journal lines,
 * so a test reads what happened in order. A call listed in `failOn` rejects instead.
 */
function stubSettle(
  options: {
    ackMode?: Settle<Delivery>['ackMode'];
    failOn?: string[];
    /** The Lambda-trigger form: giving back is throwing. */
    giveBackThrows?: boolean;
  } = {},
) {
  const log: string[] = [];
  const given: { ids: string[]; cause: Error }[] = [];
  const parked: Diagnosis[] = [];
  const retried: RetryRequest[] = [];
  const call = async (name: string, d: Delivery) => {
    const entry = `${name} ${d.message.messageId}`;
    log.push(entry);
    if (options.failOn?.includes(entry)) throw new Error(`${name} refused`);
  };
  const settle: Settle<Delivery> = {
    ackMode: options.ackMode ?? 'message',
    ack: (d) => call('ack', d),
    retryLater: async (d, request): Promise<Settled> => {
      await call('retry', d);
      retried.push(request);
      return { state: 'ack', detail: `in ${request.delayMs} ms` };
    },
    park: async (d, diagnosis): Promise<Settled> => {
      await call('park', d);
      parked.push(diagnosis);
      return { state: 'ack' };
    },
    giveBack: async (ds, cause) => {
      const ids = ds.map((d) => d.message.messageId ?? '?');
      log.push(`giveBack ${ids.join(',')}`);
      given.push({ ids, cause });
      if (options.giveBackThrows) throw new Error(`given back: ${cause.message}`);
    },
  };
  return { settle, log, given, parked, retried };
}

/** A driver on a stub settle and a recording journal; `handler` decides. */
function setup(handler: MessageHandler, options: Parameters<typeof stubSettle>[0] = {}) {
  const stub = stubSettle(options);
  const journal = new Journal();
  const lines: JournalEntry[] = [];
  journal.addSink((e) => {
    lines.push(e);
    stub.log.push(`journal ${e.step} ${e.messageId}`);
  });
  const driver = new ConsumerDriver(
    { handler, settle: stub.settle, journal },
    { consumer: 'inventory@test', now: () => NOW },
  );
  return { driver, lines, ...stub };
}

const outcomes =
  (...list: Outcome[]): MessageHandler =>
  async () =>
    list;

describe('ConsumerDriver', () => {
  it('gives the whole batch back when the handler throws, settling nothing', async () => {
    const { driver, log, given } = setup(async () => {
      throw new Error('use case bug');
    });
    const report = await driver.deliver(deliveries('a', 'b', 'c'));
    expect(report).toEqual({ messages: 3, acked: 0, retried: 0, parked: 0, returned: 3 });
    expect(log).toEqual(['journal abandoned null', 'giveBack a,b,c']);
    expect(given[0]?.cause.message).toBe('use case bug');
  });

  it('gives the whole batch back when the handler answers for the wrong number of messages', async () => {
    const { driver, log, given } = setup(outcomes(ack));
    expect((await driver.deliver(deliveries('a', 'b'))).returned).toBe(2);
    expect(log).toEqual(['journal abandoned null', 'giveBack a,b']);
    expect(given[0]?.cause.message).toMatch(/returned 1 outcomes for 2 messages/);
  });

  it('lets a give-back that throws (a Lambda trigger) propagate, with nothing settled', async () => {
    const { driver, log } = setup(
      async () => {
        throw new Error('database unreachable');
      },
      { giveBackThrows: true },
    );
    await expect(driver.deliver(deliveries('a', 'b'))).rejects.toThrow(
      /given back: database unreachable/,
    );
    expect(log).toEqual(['journal abandoned null', 'giveBack a,b']);
  });

  it('an infrastructure retry is settled like any retry, message by message', async () => {
    const { driver, log, retried } = setup(outcomes(ack, retry(true), park));
    const report = await driver.deliver(deliveries('a', 'b', 'c'));
    expect(report).toEqual({ messages: 3, acked: 3, retried: 1, parked: 1, returned: 0 });
    expect(log).toEqual([
      'ack a',
      'journal acked a',
      'retry b',
      'journal retry-scheduled b',
      'ack b',
      'journal acked b',
      'park c',
      'journal parked c',
      'ack c',
      'journal acked c',
    ]);
    // the first failure of a message that carried none is now
    expect(retried[0]).toEqual({
      delayMs: 1_000,
      attempt: 1,
      errorClass: 'transient',
      error: 'TransientDbError: connection refused',
      firstFailureAt: NOW.toISOString(),
    });
  });

  it('a settle that throws gives back that delivery and every later one, none of them acked', async () => {
    const { driver, log, given } = setup(outcomes(ack, retry(), ack, park), {
      failOn: ['retry b'],
    });
    const report = await driver.deliver(deliveries('a', 'b', 'c', 'd'));
    expect(report).toEqual({ messages: 4, acked: 1, retried: 0, parked: 0, returned: 3 });
    expect(log).toEqual([
      'ack a',
      'journal acked a',
      'retry b',
      'journal abandoned null',
      'giveBack b,c,d',
    ]);
    expect(given[0]?.cause.message).toBe('cannot settle message b: retry refused');
  });

  it('an ack that throws gives back that delivery and the later ones too', async () => {
    const { driver, log } = setup(outcomes(ack, ack, ack), { failOn: ['ack b'] });
    const report = await driver.deliver(deliveries('a', 'b', 'c'));
    expect(report).toMatchObject({ acked: 1, returned: 2 });
    expect(log).toEqual([
      'ack a',
      'journal acked a',
      'ack b',
      'journal abandoned null',
      'giveBack b,c',
    ]);
  });

  it('settle() of one delivery gives just that one back when it cannot be settled', async () => {
    const { driver, log } = setup(outcomes(), { failOn: ['park a'] });
    const [a] = deliveries('a');
    const settled = await driver.settle(a as Delivery, park);
    expect(settled).toEqual({
      state: 'returned',
      detail: 'cannot settle message a: park refused',
    });
    expect(log).toEqual(['park a', 'journal abandoned null', 'giveBack a']);
  });

  it("ackMode 'batch' journals acked for every message only once the whole batch is settled", async () => {
    const { driver, log, lines } = setup(outcomes(ack, retry(), park), { ackMode: 'batch' });
    const report = await driver.deliver(deliveries('a', 'b', 'c'));
    expect(report).toEqual({ messages: 3, acked: 3, retried: 1, parked: 1, returned: 0 });
    expect(log).toEqual([
      'ack a',
      'retry b',
      'journal retry-scheduled b',
      'ack b',
      'park c',
      'journal parked c',
      'ack c',
      'journal acked a',
      'journal acked b',
      'journal acked c',
    ]);
    expect(lines.filter((l) => l.step === 'acked').map((l) => l.outcome)).toEqual([
      'batch returned',
      'batch returned',
      'batch returned',
    ]);
  });

  it("ackMode 'batch' journals no acked line when a settle fails part way", async () => {
    const { driver, lines } = setup(outcomes(ack, retry()), {
      ackMode: 'batch',
      failOn: ['retry b'],
    });
    await driver.deliver(deliveries('a', 'b'));
    expect(lines.map((l) => l.step)).toEqual(['abandoned']);
  });

  it('fires reserve.after-retry-publish after the retry copy and before the ack', async () => {
    const { driver, log, given } = setup(outcomes(retry(), ack));
    const scope = new FaultScope();
    scope.arm('reserve.after-retry-publish');
    const report = await scope.run(() => driver.deliver(deliveries('a', 'b')));
    expect(scope.fired.map((f) => f.point)).toEqual(['reserve.after-retry-publish']);
    // the copy was made, the original neither acked nor journalled as scheduled: it goes back
    expect(log).toEqual(['retry a', 'journal abandoned null', 'giveBack a,b']);
    expect(given[0]?.cause.message).toMatch(
      /cannot settle message a: injected fault at reserve.after-retry-publish/,
    );
    expect(report).toMatchObject({ acked: 0, returned: 2 });
  });

  it('parks with a diagnosis built from the message', async () => {
    const { driver, parked } = setup(outcomes(park));
    const m = message('p', { attempt: 2, firstFailureAt: '2026-03-01T11:59:00.000Z' });
    await driver.deliver([{ message: m }]);
    expect(parked).toEqual([
      {
        messageId: 'p',
        type: 'order.created',
        schemaVersion: '1.0',
        attempts: 2,
        firstFailureAt: '2026-03-01T11:59:00.000Z',
        parkedAt: NOW.toISOString(),
        reason: 'permanent',
        errorClass: 'permanent',
        error: 'body: not valid JSON',
        correlationId: 'corr-p',
        traceId: null,
        producer: null,
        origin: { queue: null, exchange: null, routingKey: null },
        consumer: 'inventory@test',
      },
    ]);
  });

  describe('the diagnosis', () => {
    const { driver } = setup(outcomes());
    const body = (value: unknown) => Buffer.from(JSON.stringify(value));

    it("takes type and schema version from the transport, over the body's", () => {
      const d = driver.diagnose(
        message('x', { body: body({ type: 'other.type', schema_version: '9.9' }) }),
        park,
      );
      expect(d).toMatchObject({ type: 'order.created', schemaVersion: '1.0' });
    });

    it('falls back to the body for what the transport did not carry, truncated', () => {
      const d = driver.diagnose(
        message('x', {
          type: undefined,
          schemaVersion: undefined,
          body: body({ type: `t${'y'.repeat(200)}`, schema_version: '1.0-with-a-long-suffix' }),
        }),
        park,
      );
      expect(d.type).toBe(`t${'y'.repeat(127)}`);
      expect(d.schemaVersion).toBe('1.0-with-a-long-');
      const onlyVersion = driver.diagnose(
        message('x', { schemaVersion: undefined, body: body({ schema_version: '2.0' }) }),
        park,
      );
      expect(onlyVersion).toMatchObject({ type: 'order.created', schemaVersion: '2.0' });
    });

    it('says null for what neither tells (an unreadable body, no id), never the payload', () => {
      const d = driver.diagnose(
        message('x', {
          messageId: undefined,
          type: undefined,
          schemaVersion: undefined,
          correlationId: undefined,
          body: Buffer.from('{SECRET not json'),
        }),
        park,
      );
      expect(d).toMatchObject({
        messageId: null,
        type: null,
        schemaVersion: null,
        correlationId: null,
        attempts: 0,
        firstFailureAt: NOW.toISOString(),
      });
      expect(JSON.stringify(d)).not.toContain('SECRET');
    });

    it('truncates the error to 256 characters', () => {
      const d = driver.diagnose(message('x'), { ...park, error: 'e'.repeat(1_000) });
      expect(d.error).toHaveLength(256);
      expect(d.error).toBe(`${'e'.repeat(255)}…`);
      const short = driver.diagnose(message('x'), { ...park, error: 'e'.repeat(256) });
      expect(short.error).toBe('e'.repeat(256));
    });
  });
});
