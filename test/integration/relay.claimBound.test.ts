import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Publisher, Row, SqlDatabase, SqlExecutor, SqlParam } from '../../shared/index.js';
import {
  newEnvelope,
  OutboxRelay,
  type OutboxRelayOptions,
  OutboxStore,
} from '../../shared/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

/**
 * The relay's claim bound (OutboxRelay, docs/performance.md "Pinned horizon"): between full
 * claims, the relay claims only rows that occurred at most the margin before the oldest row of its
 * last claim. Rows below the bound (a late COMMIT, a retry that came due) must be published by the
 * next full claim: not lost, not starved. On PostgreSQL, with a broker that confirms everything
 * (the order of the publishes is what is checked) and the relay's clock in the test's hands.
 */
describe('outbox relay: the claim bound', () => {
  let t: TestDatabase;
  const store = new OutboxStore('outbox');
  let sent: string[] = [];
  /** Ids the broker fails once (then confirms). */
  let failOnce = new Set<string>();
  const publisher: Publisher = {
    ready: async () => {},
    close: async () => {},
    publish: async (envelopes) =>
      envelopes.map((e) => {
        if (failOnce.delete(e.id))
          return { id: e.id, ok: false as const, reason: 'nacked' as const, error: 'test' };
        sent.push(e.id);
        return { id: e.id, ok: true as const };
      }),
  };
  let clock = 0;
  /** The statements the relay ran (text and parameters), in order. */
  let statements: { sql: string; params: readonly SqlParam[] }[] = [];
  let db: SqlDatabase;

  const MARGIN_MS = 2_000;
  const PERIOD_MS = 10_000;
  const relay = (o: Partial<OutboxRelayOptions> = {}) =>
    new OutboxRelay(
      { db, publisher, now: () => clock },
      {
        table: 'outbox',
        batchSize: 3,
        maxAttempts: 5,
        claimMarginMs: MARGIN_MS,
        fullClaimEveryMs: PERIOD_MS,
        ...o,
      },
    );

  /** A row that occurred at `occurredAt`, committed now. */
  async function write(occurredAt: Date, label: string): Promise<string> {
    const orderId = randomUUID();
    const e = newEnvelope({
      type: 'order.created',
      aggregate: { type: 'order', id: orderId, version: 1 },
      data: { orderId, sku: 'SKU-B', quantity: 1 },
      correlationId: label,
      producer: 'order-service',
      occurredAt,
    });
    await t.db.transaction((tx) => store.append(tx, e));
    return e.id;
  }
  /** `n` rows occurring from `from`, 1 ms apart (ids in their order). */
  async function writeMany(from: Date, n: number, label: string): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++)
      ids.push(await write(new Date(from.getTime() + i), `${label}-${i}`));
    return ids;
  }
  const isPublished = async (id: string) =>
    (
      await t.db.query<{ published: boolean }>(
        'SELECT published_at IS NOT NULL AS published FROM outbox WHERE id = $1::uuid',
        [id],
      )
    ).rows[0]?.published;
  const claims = () => statements.filter((s) => s.sql.includes('FOR UPDATE SKIP LOCKED'));
  const probes = () => statements.filter((s) => s.sql.startsWith('SELECT EXISTS'));

  beforeAll(async () => {
    t = await createTestDatabase('relay_claim_bound');
    const recording = (ex: SqlExecutor): SqlExecutor => ({
      query: <T extends object = Row>(sql: string, params?: readonly SqlParam[]) => {
        statements.push({ sql, params: params ?? [] });
        return ex.query<T>(sql, params);
      },
    });
    db = {
      query: (sql, params) => recording(t.db).query(sql, params),
      transaction: (fn, options) => t.db.transaction((tx) => fn(recording(tx)), options),
      close: async () => {},
    };
  });
  afterAll(async () => {
    await t?.drop();
  });
  beforeEach(async () => {
    await t.db.query('TRUNCATE outbox');
    sent = [];
    failOnce = new Set();
    statements = [];
    clock = 1_000_000;
  });

  it('bounded rounds publish new rows in order; a row committed late waits for the next full claim, not longer', async () => {
    const r = relay();
    const base = Date.now() - 60_000;
    const a = await writeMany(new Date(base), 3, 'a');
    expect(await r.runOnce()).toMatchObject({ claimed: 3, published: 3 }); // the first claim: full
    expect(r.claimBound?.getTime()).toBe(base - MARGIN_MS);
    expect(r.claimCounts).toEqual({ full: 1, bounded: 0, widened: 0 });

    // a transaction that committed 30 s after its occurred_at: older than the bound
    const late = await write(new Date(base - 30_000), 'late');
    const b = await writeMany(new Date(base + 10_000), 3, 'b');
    clock += 1_000;
    expect(await r.runOnce()).toMatchObject({ claimed: 3, published: 3 });
    expect(r.claimCounts).toEqual({ full: 1, bounded: 1, widened: 0 });
    expect(await isPublished(late)).toBe(false);

    // still within the period: bounded again, the late row still waits
    const c = await writeMany(new Date(base + 20_000), 3, 'c');
    clock += PERIOD_MS - 1_000 - 1;
    expect(await r.runOnce()).toMatchObject({ claimed: 3, published: 3 });
    expect(r.claimCounts).toEqual({ full: 1, bounded: 2, widened: 0 });
    expect(await isPublished(late)).toBe(false);

    // the period since the last full claim: the full claim takes it first (oldest first)
    const d = await writeMany(new Date(base + 30_000), 1, 'd');
    clock += 1;
    expect(await r.runOnce()).toMatchObject({ claimed: 2, published: 2 });
    expect(r.claimCounts).toEqual({ full: 2, bounded: 2, widened: 0 });
    expect(sent).toEqual([...a, ...b, ...c, late, ...d]);
    // the bound went back to the late row, then the outbox is empty: a full claim next
    expect(r.claimBound?.getTime()).toBe(base - 30_000 - MARGIN_MS);
    expect(await r.runOnce()).toMatchObject({ claimed: 0 });
    expect(r.claimBound).toBeUndefined();

    // the statements: bounded ones carry the bound as a parameter, full ones are the claim of old
    const bounded = claims().filter((s) => s.sql.includes('occurred_at >='));
    expect(bounded).toHaveLength(2);
    expect(bounded[0]?.params).toEqual([3, new Date(base - MARGIN_MS).toISOString()]);
    expect(claims().filter((s) => !s.sql.includes('occurred_at >='))).toHaveLength(2);
  });

  it('a retried row whose next_attempt_at comes due behind the bound is published by the next full claim', async () => {
    const r = relay({ retryBaseMs: 60_000, retryMaxMs: 60_000 });
    const base = Date.now() - 60_000;
    const [retried = '', ...rest] = await writeMany(new Date(base), 3, 'r');
    failOnce.add(retried);
    expect(await r.runOnce()).toMatchObject({ claimed: 3, published: 2, failed: 1 });

    // newer rows move the bound past it (it is not due yet: 30–60 s of backoff)
    const n1 = await writeMany(new Date(base + 10_000), 3, 'n1');
    clock += 1_000;
    expect(await r.runOnce()).toMatchObject({ claimed: 3, published: 3 });
    expect(r.claimBound?.getTime()).toBe(base + 10_000 - MARGIN_MS);

    // it comes due: behind the bound, so bounded rounds leave it while newer rows keep coming
    await t.db.query('UPDATE outbox SET next_attempt_at = now() WHERE id = $1::uuid', [retried]);
    const n2 = await writeMany(new Date(base + 20_000), 3, 'n2');
    clock += 1_000;
    expect(await r.runOnce()).toMatchObject({ claimed: 3, published: 3 });
    expect(await isPublished(retried)).toBe(false);

    clock += PERIOD_MS;
    const n3 = await writeMany(new Date(base + 30_000), 2, 'n3');
    expect(await r.runOnce()).toMatchObject({ claimed: 3, published: 3 });
    expect(sent).toEqual([...rest, ...n1, ...n2, retried, ...n3]);
    const { rows } = await t.db.query<{ attempts: number }>(
      'SELECT attempts FROM outbox WHERE id = $1::uuid',
      [retried],
    );
    expect(rows[0]?.attempts).toBe(1);
  });

  it('a bounded round that finds nothing past the bound looks at the whole outbox before it ends', async () => {
    const r = relay();
    const base = Date.now() - 60_000;
    await writeMany(new Date(base), 3, 'a');
    await r.runOnce();
    const late = await write(new Date(base - 30_000), 'late');
    statements = [];
    clock += 1_000;
    // nothing new: the bounded probe finds nothing, the full one the late row, which is published
    expect(await r.runOnce()).toMatchObject({ claimed: 1, published: 1 });
    expect(await isPublished(late)).toBe(true);
    expect(r.claimCounts).toEqual({ full: 2, bounded: 0, widened: 1 });
    expect(probes().map((s) => s.params.length)).toEqual([1, 0]);

    // an outbox that became empty: the round after rows costs two probes, the next ones one
    statements = [];
    clock += 1_000;
    expect(await r.runOnce()).toMatchObject({ claimed: 0 });
    expect(statements.map((s) => s.params.length)).toEqual([1, 0]);
    statements = [];
    clock += 1_000;
    expect(await r.runOnce()).toMatchObject({ claimed: 0 });
    expect(await r.runOnce()).toMatchObject({ claimed: 0 });
    expect(statements.map((s) => s.params.length)).toEqual([0, 0]);
    expect(claims()).toHaveLength(0);
  });

  it('rows past the bound all locked by another relay: the round claims the whole outbox instead', async () => {
    const r = relay();
    const base = Date.now() - 60_000;
    await writeMany(new Date(base), 3, 'a');
    await r.runOnce();
    const late = await write(new Date(base - 30_000), 'late');
    const held = await write(new Date(base + 10_000), 'held');
    clock += 1_000;
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let locked: () => void = () => {};
    const isLocked = new Promise<void>((resolve) => {
      locked = resolve;
    });
    // another relay's round holds the only row past the bound
    const other = t.db.transaction(async (tx) => {
      await tx.query('SELECT id FROM outbox WHERE id = $1::uuid FOR UPDATE', [held]);
      locked();
      await released;
    });
    try {
      await isLocked;
      expect(await r.runOnce()).toMatchObject({ claimed: 1, published: 1 });
    } finally {
      release();
      await other;
    }
    expect(await isPublished(late)).toBe(true);
    expect(await isPublished(held)).toBe(false);
    expect(r.claimCounts).toEqual({ full: 2, bounded: 1, widened: 1 });
  });

  it('each drain begins with a full claim, and a drain that stops when idle leaves no due row behind', async () => {
    const r = relay();
    const base = Date.now() - 60_000;
    await writeMany(new Date(base), 3, 'a');
    await r.runOnce();
    sent = [];
    const late = await write(new Date(base - 30_000), 'late');
    const fresh = await writeMany(new Date(base + 10_000), 2, 'fresh');
    clock += 1_000;
    const result = await r.drain({ budgetMs: 10_000, idleWaitMs: 5, stopWhenIdle: true });
    expect(result).toMatchObject({ published: 3, roundErrors: 0 });
    // oldest first: the drain's first claim was a full one
    expect(sent).toEqual([late, ...fresh]);
  });

  it('within one drain, a row committed late behind the bound is published before the drain stops', async () => {
    const base = Date.now() - 60_000;
    await writeMany(new Date(base + 20_000), 2, 'x');
    let late: string | undefined;
    let y: string[] = [];
    // while the drain's first batch is being published, a late COMMIT and two new rows
    const hooked: Publisher = {
      ...publisher,
      publish: async (envelopes) => {
        if (late === undefined) {
          late = await write(new Date(base - 20_000), 'late-in-drain');
          y = await writeMany(new Date(base + 21_000), 2, 'y');
        }
        return publisher.publish(envelopes);
      },
    };
    const r = new OutboxRelay(
      { db, publisher: hooked, now: () => clock },
      {
        table: 'outbox',
        batchSize: 2,
        maxAttempts: 5,
        claimMarginMs: MARGIN_MS,
        fullClaimEveryMs: PERIOD_MS,
      },
    );
    // the clock stands still: no full claim is due by the period within this drain
    const result = await r.drain({ budgetMs: 10_000, idleWaitMs: 5, stopWhenIdle: true });
    expect(result).toMatchObject({ published: 5, roundErrors: 0 });
    // the new rows past the bound first; the round that then found nothing there widened
    expect(sent.slice(2)).toEqual([...y, late]);
    expect(r.claimCounts).toMatchObject({ bounded: 1, widened: 2 });
  });

  it('fullClaimEveryMs 0: every claim in full, as before the bound', async () => {
    const r = relay({ fullClaimEveryMs: 0 });
    const base = Date.now() - 60_000;
    const a = await writeMany(new Date(base), 3, 'a');
    await r.runOnce();
    const late = await write(new Date(base - 30_000), 'late');
    const b = await writeMany(new Date(base + 10_000), 3, 'b');
    await r.runOnce();
    await r.runOnce();
    expect(sent).toEqual([...a, late, ...b]);
    expect(statements.some((s) => s.sql.includes('occurred_at >='))).toBe(false);
    expect(r.claimCounts).toEqual({ full: 3, bounded: 0, widened: 0 });
  });

  it('the bound is an index condition of outbox_unpublished_idx: the scan starts at the bound', async () => {
    const r = relay();
    const base = Date.now() - 60_000;
    await writeMany(new Date(base), 3, 'a');
    await r.runOnce();
    await writeMany(new Date(base + 10_000), 3, 'b');
    statements = [];
    clock += 1_000;
    await r.runOnce();
    const probe = probes()[0];
    const claim = claims()[0];
    expect(probe?.params).toHaveLength(1);
    expect(claim?.params).toHaveLength(2);
    for (const s of [probe, claim]) {
      const plan = await t.db.transaction(async (tx) => {
        // a table of six rows: the planner would sort a sequential scan; the question is whether
        // the index can start at the bound
        await tx.query('SET LOCAL enable_seqscan = off');
        const { rows } = await tx.query<{ 'QUERY PLAN': string }>(
          `EXPLAIN ${s?.sql}`,
          s?.params as SqlParam[],
        );
        return rows.map((row) => row['QUERY PLAN']).join('\n');
      });
      expect(plan).toMatch(/Index (Only )?Scan using outbox_unpublished_idx/);
      expect(plan).toMatch(/Index Cond: \(occurred_at >= /);
    }
  });
});
