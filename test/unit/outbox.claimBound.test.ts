import { describe, expect, it } from 'vitest';
import type { Publisher } from '../../shared/index.js';
import { OutboxRelay, OutboxStore } from '../../shared/index.js';
import { sqlRecorder } from '../helpers/sqlRecorder.js';

describe('the claim bound (OutboxStore, OutboxRelay)', () => {
  it('without a bound, the claim and the probe are the statements of old; with one, they add it before the ORDER BY', async () => {
    const store = new OutboxStore('outbox');
    const { ex, seen } = sqlRecorder();
    const from = new Date('2026-12-02T12:00:00.123Z');
    await store.hasClaimable(ex);
    await store.claimBatch(ex, 500);
    await store.hasClaimable(ex, { occurredFrom: from });
    await store.claimBatch(ex, 500, { occurredFrom: from });
    const [has, claim, boundedHas, boundedClaim] = seen;
    expect(has?.sql).not.toContain('occurred_at >=');
    expect(has?.params).toBeUndefined();
    expect(claim?.sql).not.toContain('occurred_at >=');
    expect(claim?.params).toEqual([500]);
    expect(boundedHas?.params).toEqual(['2026-12-02T12:00:00.123Z']);
    expect(boundedClaim?.params).toEqual([500, '2026-12-02T12:00:00.123Z']);
    expect(boundedClaim?.sql).toMatch(
      /next_attempt_at <= now\(\) AND occurred_at >= \$2::timestamptz\s+ORDER BY occurred_at\s+LIMIT \$1\s+FOR UPDATE SKIP LOCKED/,
    );
    // word for word the unbounded statements, the bound added and nothing else
    expect(boundedHas?.sql).toBe(
      has?.sql.replace(
        'next_attempt_at <= now()) AS found',
        'next_attempt_at <= now() AND occurred_at >= $1::timestamptz) AS found',
      ),
    );
    expect(boundedClaim?.sql).toBe(
      claim?.sql.replace(
        /next_attempt_at <= now\(\)(\s+ORDER BY occurred_at\b)/,
        'next_attempt_at <= now() AND occurred_at >= $2::timestamptz$1',
      ),
    );
  });

  it('rejects a negative margin or period', () => {
    const deps = { db: {} as never, publisher: {} as Publisher };
    const base = { table: 'outbox' as const, batchSize: 10, maxAttempts: 3 };
    expect(() => new OutboxRelay(deps, { ...base, claimMarginMs: -1 })).toThrow(/claimMarginMs/);
    expect(() => new OutboxRelay(deps, { ...base, fullClaimEveryMs: Number.NaN })).toThrow(
      /fullClaimEveryMs/,
    );
    expect(new OutboxRelay(deps, base).claimBound).toBeUndefined();
  });
});
