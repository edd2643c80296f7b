import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import type { Publisher, Row, SqlDatabase, SqlExecutor, SqlParam } from '../../shared/index.js';
import { type Envelope, newEnvelope, OutboxRelay, OutboxStore } from '../../shared/index.js';
import { SET_ASIDE_PREFIX } from '../../shared/outbox/OutboxStore.js';
import { localDataApi } from '../helpers/dataApi.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

/** The Data API's row limit as the adapter reads it (64 KB), and the relay's default claim bound. */
const MAX_ROW_BYTES = 64_000;
const MAX_CLAIM_BYTES = 768 * 1024;

/**
 * A claim bounded by bytes as well as rows (docs/outbox-relay.md, "One round"). The RDS Data API
 * terminates a call whose response is over 1 MiB (docs/aws-facts.md), and the local endpoint does
 * the same: a claim of 500 rows of 8 KB would fail on the same head rows for ever. On the real
 * PostgreSQL, through the Data API adapter (the SDK over HTTP) and node-postgres, with a broker
 * that confirms everything (the claims are under test).
 */
describe('outbox relay: a claim bounded by bytes', () => {
  let t: TestDatabase;
  let api: Awaited<ReturnType<typeof localDataApi>>;
  const store = new OutboxStore('outbox');
  let sent: string[] = [];
  const publisher: Publisher = {
    ready: async () => {},
    close: async () => {},
    publish: async (envelopes) =>
      envelopes.map((e) => {
        sent.push(e.id);
        return { id: e.id, ok: true as const };
      }),
  };

  beforeAll(async () => {
    t = await createTestDatabase('relay_claim_bytes');
    api = await localDataApi(t.url, t.name);
  });
  afterAll(async () => {
    await api?.close();
    await t?.drop();
  });
  beforeEach(async () => {
    await t.db.query('TRUNCATE outbox');
    sent = [];
  });

  /** `n` events whose `data.blob` is `blob(i)`, oldest first (1 ms apart, an hour ago). */
  async function write(n: number, blob: (i: number) => string): Promise<string[]> {
    const from = Date.now() - 3_600_000;
    const envelopes: Envelope[] = Array.from({ length: n }, (_, i) => {
      const orderId = randomUUID();
      return newEnvelope({
        type: 'order.created',
        aggregate: { type: 'order', id: orderId, version: 1 },
        data: { orderId, sku: 'SKU-BIG', quantity: 1, blob: blob(i) },
        correlationId: `big-${i}`,
        producer: 'order-service',
        occurredAt: new Date(from + i),
      });
    });
    for (let i = 0; i < n; i += 50) await store.appendMany(t.db, envelopes.slice(i, i + 50));
    return envelopes.map((e) => e.id);
  }

  /** Drains with `relay` until `expected` were published (the drain is aborted then). */
  async function drainUntil(relay: OutboxRelay, expected: number) {
    const abort = new AbortController();
    // an idle wait far longer than the test: a round that stopped at its byte bound must not wait
    const draining = relay.drain({
      budgetMs: 120_000,
      idleWaitMs: 600_000,
      concurrency: 2,
      signal: abort.signal,
    });
    try {
      await waitFor(() => sent.length >= expected, {
        timeoutMs: 45_000,
        message: `${expected} rows published`,
      });
    } finally {
      abort.abort();
    }
    return draining;
  }

  /** A database whose claims are recorded (statement and parameters), with `limits` declared. */
  function recording(db: SqlDatabase): { db: SqlDatabase; claims: readonly SqlParam[][] } {
    const claims: SqlParam[][] = [];
    const wrap = (ex: SqlExecutor): SqlExecutor => ({
      query: <T extends object = Row>(sql: string, params?: readonly SqlParam[]) => {
        if (sql.includes('FOR UPDATE SKIP LOCKED')) claims.push([...(params ?? [])]);
        return ex.query<T>(sql, params);
      },
    });
    return {
      claims,
      db: {
        ...(db.resultLimits ? { resultLimits: db.resultLimits } : {}),
        query: (sql, params) => wrap(db).query(sql, params),
        transaction: (fn, options) => db.transaction((tx) => fn(wrap(tx)), options),
        close: async () => {},
      },
    };
  }

  it("the constants of this file are the code's", async () => {
    const { DATA_API_RESULT_LIMITS } = await import('../../shared/db/data-api/DataApiDatabase.js');
    const { DEFAULT_MAX_CLAIM_BYTES } = await import('../../shared/outbox/OutboxRelay.js');
    expect(DATA_API_RESULT_LIMITS).toEqual({
      maxResponseBytes: 1024 * 1024,
      maxRowBytes: MAX_ROW_BYTES,
    });
    expect(DEFAULT_MAX_CLAIM_BYTES).toBe(MAX_CLAIM_BYTES);
  });

  it('the local Data API endpoint ends a response over 1 MiB as the service does, and the transaction with it', async () => {
    const big = "SELECT repeat('x', 1024) AS x FROM generate_series(1, 1100)";
    await expect(api.db.query(big)).rejects.toThrow(
      'Database returned more than the allowed response size limit',
    );
    // just under: answered
    expect(
      (await api.db.query("SELECT repeat('x', 1024) AS x FROM generate_series(1, 900)")).rows,
    ).toHaveLength(900);
    const committed = api.db.transaction(async (tx) => {
      await tx.query(big).catch(() => {});
      await tx.query('SELECT 1');
    });
    await expect(committed).rejects.toThrow(/isn't found/);
    expect(api.server.openTransactions()).toBe(0);
  });

  it('300 rows of 8 KB through the Data API adapter: every one is published, each claim under the response limit', async () => {
    const ids = await write(300, (i) => `${i}`.padEnd(8_000, 'x'));
    const { db, claims } = recording(api.db);
    const relay = new OutboxRelay(
      { db, publisher },
      { table: 'outbox', batchSize: 500, maxAttempts: 5 },
    );
    const result = await drainUntil(relay, 300);
    expect(result.roundErrors).toBe(0);
    expect(new Set(sent)).toEqual(new Set(ids));
    expect(sent).toHaveLength(300);
    expect(await store.status(t.db)).toMatchObject({ backlog: 0, needsAttention: 0 });
    // about 90 rows fit a claim: after the first ones (each loop's first may lock 500), the claims
    // lock a little more than they take
    const limits = claims.map((p) => p[0] as number);
    expect(limits[0]).toBe(500);
    expect(limits.length).toBeGreaterThan(2);
    expect(Math.max(...limits.slice(2))).toBeLessThan(250);
  });

  it('payloads that grow when escaped (quotes, backslashes, non-ASCII) are sized as the response carries them', async () => {
    // 4,000 characters that JSON writes as 8,000 bytes or more; 200 of them would be 1.6 MB
    const ids = await write(200, (i) => `${i}${'"\\é'.repeat(1_333)}`);
    const relay = new OutboxRelay(
      { db: api.db, publisher },
      { table: 'outbox', batchSize: 500, maxAttempts: 5 },
    );
    const result = await drainUntil(relay, 200);
    expect(result.roundErrors).toBe(0);
    expect(new Set(sent)).toEqual(new Set(ids));
  });

  it('a row larger than the Data API returns at all is set aside with its reason; the rows behind it go out', async () => {
    const [huge = ''] = await write(1, () => 'y'.repeat(MAX_ROW_BYTES));
    const rest = await write(5, (i) => `small-${i}`);
    const relay = new OutboxRelay(
      { db: api.db, publisher },
      { table: 'outbox', batchSize: 500, maxAttempts: 5 },
    );
    expect(await relay.runOnce()).toMatchObject({ claimed: 6, published: 5, setAside: 1 });
    expect(sent).toEqual(rest);
    const { rows } = await t.db.query<{ last_error: string; needs: boolean }>(
      'SELECT last_error, needs_attention_at IS NOT NULL AS needs FROM outbox WHERE id = $1::uuid',
      [huge],
    );
    expect(rows[0]?.needs).toBe(true);
    expect(rows[0]?.last_error).toMatch(
      new RegExp(
        `^${SET_ASIDE_PREFIX}too large: the row takes \\d+ bytes of a result, the database returns at most 64000 per row$`,
      ),
    );
  });

  it('node-postgres: the same rows, in claims of the same bound; a row of 100 KB is published (no row limit there)', async () => {
    const [large = ''] = await write(1, () => 'z'.repeat(100_000));
    const ids = await write(300, (i) => `${i}`.padEnd(8_000, 'x'));
    const { db, claims } = recording(t.db);
    const relay = new OutboxRelay(
      { db, publisher },
      { table: 'outbox', batchSize: 500, maxAttempts: 5 },
    );
    const result = await drainUntil(relay, 301);
    expect(result).toMatchObject({ roundErrors: 0, setAside: 0 });
    expect(new Set(sent)).toEqual(new Set([large, ...ids]));
    // 2.5 MB of rows in claims of at most the default bound
    expect(claims.length).toBeGreaterThanOrEqual(Math.ceil((301 * 8_400) / MAX_CLAIM_BYTES));
  });
});
