import { describe, expect, it } from 'vitest';
import {
  type AutovacuumRule,
  autovacuumNeeds,
  lastThird,
  lossPercent,
  statementKind,
} from '../../bench/pinnedHorizon.js';
import { OutboxStore } from '../../shared/outbox/OutboxStore.js';
import { sqlRecorder } from '../helpers/sqlRecorder.js';

describe('the pinned-xmin phase (bench/pinnedHorizon.ts)', () => {
  it("knows the relay's statements, full and bounded", async () => {
    const store = new OutboxStore('outbox');
    const { ex, seen } = sqlRecorder();
    const occurredFrom = new Date('2026-12-02T12:00:00.123Z');
    await store.hasClaimable(ex);
    await store.claimBatch(ex, 500);
    await store.hasClaimable(ex, { occurredFrom });
    await store.claimBatch(ex, 500, { occurredFrom });
    await store.markPublished(ex, ['5b0c2f7e-8d1a-4c53-9a51-7d2f9c1e0a11']);
    expect(seen.map((s) => statementKind(s.sql))).toEqual([
      'hasClaimable',
      'claim',
      'hasClaimable',
      'claim',
      'mark',
    ]);
    expect(statementKind('SELECT 1')).toBeUndefined();
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
