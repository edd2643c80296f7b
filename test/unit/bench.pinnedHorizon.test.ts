import { describe, expect, it } from 'vitest';
import {
  type AutovacuumRule,
  autovacuumNeeds,
  boundClaim,
  boundHasClaimable,
  lastThird,
  lossPercent,
  statementKind,
  Watermark,
} from '../../bench/pinnedHorizon.js';
import { OutboxStore } from '../../shared/outbox/OutboxStore.js';
import { sqlRecorder } from '../helpers/sqlRecorder.js';

describe('the pinned-xmin phase (bench/pinnedHorizon.ts)', () => {
  it("knows the relay's statements and bounds the two claim statements (the alternative claim)", async () => {
    const store = new OutboxStore('outbox');
    const { ex, seen } = sqlRecorder();
    await store.hasClaimable(ex);
    await store.claimBatch(ex, 500);
    await store.markPublished(ex, ['5b0c2f7e-8d1a-4c53-9a51-7d2f9c1e0a11']);
    const [has, claim, mark] = seen;
    expect(statementKind(has?.sql ?? '')).toBe('hasClaimable');
    expect(statementKind(claim?.sql ?? '')).toBe('claim');
    expect(statementKind(mark?.sql ?? '')).toBe('mark');
    expect(statementKind('SELECT 1')).toBeUndefined();
    // the bounded statements differ from production only by the bound, before the ORDER BY
    const boundedHas = boundHasClaimable(has?.sql ?? '');
    expect(boundedHas).toContain('next_attempt_at <= now() AND occurred_at >= $1::timestamptz)');
    const boundedClaim = boundClaim(claim?.sql ?? '', 2);
    expect(boundedClaim).toMatch(
      /next_attempt_at <= now\(\) AND occurred_at >= \$2::timestamptz\s+ORDER BY occurred_at\s+LIMIT \$1\s+FOR UPDATE SKIP LOCKED/,
    );
    expect(() => boundClaim('SELECT 1', 2)).toThrow(/changed/);
    expect(() => boundHasClaimable('SELECT 1')).toThrow(/changed/);
  });

  it('bounds a round at the oldest row last claimed minus the margin, and claims in full every sweep interval', () => {
    let now = 1_000_000;
    const w = new Watermark(2_000, 10_000, () => now);
    expect(w.boundForRound()).toBeUndefined(); // the first round claims in full
    w.claimed(new Date(900_000));
    expect(w.boundForRound()?.getTime()).toBe(898_000);
    now += 5_000;
    w.claimed(undefined); // nothing past the bound: the bound stays
    expect(w.boundForRound()?.getTime()).toBe(898_000);
    w.claimed(new Date(905_000)); // a short batch moves it all the same
    expect(w.bound?.getTime()).toBe(903_000);
    now += 5_000; // the sweep interval since the last full claim
    expect(w.boundForRound()).toBeUndefined();
    expect({ sweeps: w.sweeps, bounded: w.bounded }).toEqual({ sweeps: 2, bounded: 2 });
    // an outbox found empty by a full claim: bounded from then on, less the margin
    const empty = new Watermark(2_000, 10_000, () => now);
    expect(empty.boundForRound()).toBeUndefined();
    empty.claimed(undefined);
    expect(empty.boundForRound()?.getTime()).toBe(now - 2_000);
  });

  it("applies PostgreSQL's autovacuum rule", () => {
    const rule: AutovacuumRule = {
      vacThreshold: 50,
      vacScale: 0.2,
      insThreshold: 1000,
      insScale: 0.2,
      anlThreshold: 50,
      anlScale: 0.1,
      costDelayMs: 2,
      costLimit: 200,
    };
    const t = { deadTuples: 0, insertedSinceVacuum: 0, modifiedSinceAnalyze: 0, reltuples: 1000 };
    expect(autovacuumNeeds(rule, t)).toEqual({ vacuum: false, analyze: false });
    expect(autovacuumNeeds(rule, { ...t, deadTuples: 251 })).toEqual({
      vacuum: true,
      analyze: false,
    });
    expect(autovacuumNeeds(rule, { ...t, insertedSinceVacuum: 1201 }).vacuum).toBe(true);
    expect(autovacuumNeeds(rule, { ...t, modifiedSinceAnalyze: 151 }).analyze).toBe(true);
    // a table never vacuumed has reltuples -1: counted as empty
    expect(autovacuumNeeds(rule, { ...t, reltuples: -1, deadTuples: 51 }).vacuum).toBe(true);
    expect(
      autovacuumNeeds({ ...rule, insThreshold: -1 }, { ...t, insertedSinceVacuum: 1e9 }).vacuum,
    ).toBe(false);
  });

  it('reports the loss in percent and the rate of the last third of the slices', () => {
    expect(lossPercent(4000, 3000)).toBe(25);
    expect(lossPercent(4000, 4400)).toBe(-10);
    expect(lossPercent(0, 10)).toBeNaN();
    expect(lastThird([4000, 3000, 2000, 1000, 900, 800])).toBe(850);
    expect(lastThird([10])).toBe(10);
  });
});
