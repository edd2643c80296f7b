import { describe, expect, it } from 'vitest';
import { type AccountingFacts, account } from '../../lab/accounting.js';

type Line = AccountingFacts['lines'][number];

const committed = (messageId: string, at: number): Line => ({
  step: 'effect-committed',
  messageId,
  at,
});
const parkedAt = (messageId: string, at: number): Line => ({ step: 'parked', messageId, at });
const event = (eventId: string, aggregateId = `order-${eventId}`, version = 1) => ({
  eventId,
  aggregateId,
  version,
});
/** Ours: an inbox row per decided event (the journal counts the effects). */
const inbox = (...ids: string[]) => ids.map((eventId) => ({ eventId, effects: 0, at: null }));

const facts = (f: Partial<AccountingFacts>): AccountingFacts => ({
  accepted: [],
  uncertain: [],
  lines: [],
  stored: [],
  parked: [],
  ...f,
});

describe('Lab accounting (Jepsen: accepted against decided)', () => {
  it('every accepted event decided once: nothing lost, duplicated or unexpected', () => {
    const a = account(
      facts({
        accepted: [event('a'), event('b'), event('c')],
        lines: [committed('a', 10), committed('b', 11), committed('c', 12)],
        stored: inbox('a', 'b', 'c'),
      }),
    );
    expect(a).toEqual({
      accepted: 3,
      decided: 3,
      lost: 0,
      duplicated: 0,
      recovered: 0,
      unexpected: 0,
      orderViolations: 0,
      recoverMs: null,
    });
  });

  it('decided: an inbox row (results such as rejections included) or parked; else lost', () => {
    const a = account(
      facts({
        accepted: [event('applied'), event('parked'), event('missing')],
        lines: [committed('applied', 10)],
        stored: inbox('applied'),
        parked: ['parked', null, 'junk'],
      }),
    );
    expect(a).toMatchObject({ accepted: 3, decided: 2, lost: 1, unexpected: 0 });
  });

  it('duplicated: an event applied n times counts n − 1, from the journal or a peer’s rows', () => {
    const ours = account(
      facts({
        accepted: [event('a'), event('b')],
        lines: [
          committed('a', 1),
          committed('a', 2),
          committed('b', 3),
          committed('b', 4),
          committed('b', 5),
        ],
        stored: inbox('a', 'b'),
      }),
    );
    expect(ours.duplicated).toBe(3);
    // a peer: two effect rows for one event, journaled once (its own transaction)
    const peer = account(
      facts({
        accepted: [event('a')],
        lines: [committed('a', 1)],
        stored: [{ eventId: 'a', effects: 2, at: 1 }],
      }),
    );
    expect(peer).toMatchObject({ decided: 1, duplicated: 1 });
  });

  it('unexpected: effects of no accepted event (parked junk is not one)', () => {
    const a = account(
      facts({
        accepted: [event('a')],
        lines: [committed('a', 1), committed('stray', 2), parkedAt('junk', 3)],
        stored: inbox('a', 'stray'),
        parked: ['junk'],
      }),
    );
    expect(a).toMatchObject({ accepted: 1, decided: 1, unexpected: 1, lost: 0 });
  });

  it('order violations: an event first applied after a higher version of its key', () => {
    const base = {
      accepted: [event('v1', 'o1', 1), event('v2', 'o1', 2), event('w1', 'o2', 1)],
      stored: inbox('v1', 'v2', 'w1'),
    };
    expect(
      account(
        facts({ ...base, lines: [committed('w1', 1), committed('v1', 2), committed('v2', 3)] }),
      ).orderViolations,
    ).toBe(0);
    // v2 before v1 on o1; o2 is another key
    expect(
      account(
        facts({ ...base, lines: [committed('v2', 1), committed('w1', 2), committed('v1', 3)] }),
      ).orderViolations,
    ).toBe(1);
    // a second application of v1 after v2 is a duplicate, not an order violation
    const again = account(
      facts({ ...base, lines: [committed('v1', 1), committed('v2', 2), committed('v1', 3)] }),
    );
    expect(again).toMatchObject({ orderViolations: 0, duplicated: 1 });
    // in time order, whatever order the lines are given in
    expect(
      account(facts({ ...base, lines: [committed('v1', 5), committed('v2', 3)] })).orderViolations,
    ).toBe(1);
  });

  it('recovered: uncertain publishes that were decided anyway', () => {
    const a = account(
      facts({
        accepted: [event('a'), event('b'), event('c')],
        uncertain: ['a', 'b'],
        lines: [committed('a', 1), committed('c', 2)],
        stored: inbox('a', 'c'),
      }),
    );
    expect(a).toMatchObject({ recovered: 1, lost: 1 });
  });

  it('time to recover: from the fault end to the last decision of an accepted event', () => {
    const base = {
      accepted: [event('a'), event('b'), event('c')],
      lines: [
        committed('a', 900),
        committed('b', 1_500),
        committed('c', 2_300),
        committed('x', 9_000),
      ],
      stored: inbox('a', 'b', 'c', 'x'),
    };
    expect(account(facts({ ...base, faultEndedAt: 1_000 })).recoverMs).toBe(1_300);
    // no fault end marked
    expect(account(facts(base)).recoverMs).toBeNull();
    // everything decided before the fault ended
    expect(account(facts({ ...base, faultEndedAt: 5_000 })).recoverMs).toBe(0);
    // nothing decided
    expect(account(facts({ accepted: [event('a')], faultEndedAt: 1_000 })).recoverMs).toBeNull();
  });

  it('a parked event is decided when it was parked for good; redriven and applied, when applied', () => {
    const parkedOnly = account(
      facts({
        accepted: [event('a')],
        // the first park did not take (the parking lot was unreachable); the second did
        lines: [parkedAt('a', 1_100), parkedAt('a', 1_700)],
        parked: ['a'],
        faultEndedAt: 1_000,
      }),
    );
    expect(parkedOnly).toMatchObject({ decided: 1, recoverMs: 700 });
    const redriven = account(
      facts({
        accepted: [event('a')],
        lines: [parkedAt('a', 500), committed('a', 2_000)],
        stored: inbox('a'),
        faultEndedAt: 1_000,
      }),
    );
    expect(redriven).toMatchObject({ decided: 1, recoverMs: 1_000 });
  });

  it("a peer's effect rows: decided by its commit time when the journal has no line", () => {
    const a = account(
      facts({
        accepted: [event('a'), event('b')],
        lines: [committed('a', 1_200)],
        stored: [
          { eventId: 'a', effects: 1, at: 1_150 },
          { eventId: 'b', effects: 1, at: 1_400 },
        ],
        faultEndedAt: 1_000,
      }),
    );
    expect(a).toMatchObject({ decided: 2, duplicated: 0, recoverMs: 400 });
  });
});
