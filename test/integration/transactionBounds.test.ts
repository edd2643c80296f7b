import middy from '@middy/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localLambdaContext } from '../../devkit/triggers/lambdaContext.js';
import { waitFor } from '../../devkit/waitFor.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type { Logger, SqlDatabase, TransactionTimeouts } from '../../shared/index.js';
import { TransientDbError } from '../../shared/index.js';
import { transactionDeadline } from '../../shared/middleware/transactionDeadline.js';
import { localDataApi } from '../helpers/dataApi.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

/**
 * A function that times out mid-transaction must not leave the transaction and its row
 * locks behind. Proven on the real PostgreSQL for both drivers (node-postgres, and the Data API
 * through the local endpoint): a handler stuck inside a transaction that holds a row lock, then
 * (a) the deadline middleware rolls it back before the function's timeout, and (b) without it
 * (the runtime killed) the transaction's own bounds end it; either way no session stays idle in
 * transaction and a second transaction gets the row.
 */
const BOUNDS: TransactionTimeouts = {
  lockTimeoutMs: 300,
  statementTimeoutMs: 600,
  idleInTransactionTimeoutMs: 800,
};

/** Bounds that cannot end the stuck transaction within the test: only the deadline can. */
const ROOMY: TransactionTimeouts = {
  lockTimeoutMs: 300,
  statementTimeoutMs: 30_000,
  idleInTransactionTimeoutMs: 60_000,
};

/** Never settles: the handler is stuck, as one that runs into its function timeout. */
const forever = () => new Promise<never>(() => {});

describe.each(['pg', 'data-api'] as const)('transaction bounds (%s)', (driver) => {
  let t: TestDatabase;
  let db: SqlDatabase;
  let roomy: SqlDatabase;
  const closes: (() => Promise<void>)[] = [];
  const app = `bounds-${driver}`;

  beforeAll(async () => {
    t = await createTestDatabase(`tx_bounds_${driver.replace('-', '_')}`, { migrated: false });
    await t.db.query(
      "CREATE TABLE cells (id int PRIMARY KEY, v text NOT NULL); INSERT INTO cells VALUES (1, 'a'), (2, 'b')",
    );
    const open = async (bounds: TransactionTimeouts): Promise<SqlDatabase> => {
      if (driver === 'pg') {
        const pg = new PgDatabase({
          connectionString: t.url,
          max: 2,
          applicationName: app,
          transactionTimeouts: bounds,
        });
        closes.push(() => pg.close());
        return pg;
      }
      const api = await localDataApi(t.url, t.name, {}, { transactionTimeouts: bounds });
      closes.push(() => api.close());
      return api.db;
    };
    db = await open(BOUNDS);
    roomy = await open(ROOMY);
  });
  afterAll(async () => {
    for (const close of closes) await close();
    await t?.drop();
  });

  /** Sessions of this test's database idle inside a transaction (other than the test's own). */
  const idleInTransaction = async () => {
    const { rows } = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = $1 AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()`,
      [t.name],
    );
    return rows[0]?.n ?? 0;
  };
  /**
   * Samples, on the server's clock, how long this test's sessions have been idle inside a
   * transaction (`now() - state_change`), every 25 ms until stopped: the longest seen.
   */
  const longestIdleInTransaction = () => {
    let longest = 0;
    let running = true;
    const loop = (async () => {
      while (running) {
        const { rows } = await t.db.query<{ ms: number | null }>(
          `SELECT max(extract(epoch FROM clock_timestamp() - state_change) * 1000)::float8 AS ms
             FROM pg_stat_activity
            WHERE datname = $1 AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()`,
          [t.name],
        );
        longest = Math.max(longest, rows[0]?.ms ?? 0);
        await new Promise((r) => setTimeout(r, 25));
      }
    })();
    return async () => {
      running = false;
      await loop;
      return longest;
    };
  };
  /** The row, if another transaction can lock it right now. */
  const lockable = async (id: number) =>
    t.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ v: string }>(
        'SELECT v FROM cells WHERE id = $1 FOR UPDATE SKIP LOCKED',
        [id],
      );
      return rows[0];
    });

  const stuckInTransaction = (id: number, on = db) =>
    on.transaction(async (tx) => {
      await tx.query("UPDATE cells SET v = 'stuck' WHERE id = $1", [id]);
      return forever();
    });

  it('a forced timeout: the deadline middleware rolls back before the function times out', async () => {
    const warnings: unknown[] = [];
    const logger = {
      warn: (_m: string, extra: unknown) => warnings.push(extra),
    } as unknown as Logger;
    const handler = middy(async () => stuckInTransaction(1, roomy)).use(
      transactionDeadline({ db: roomy, marginMs: 200, logger }),
    );
    const sampled = longestIdleInTransaction();
    // a function with 1.5 s left: the middleware rolls back at 1.3 s (the static bounds of this
    // database would keep the transaction for a minute)
    const outcome = handler({}, localLambdaContext('stuck', 1_500)).then(
      () => 'returned',
      (err: unknown) => err,
    );
    await waitFor(
      async () => (await lockable(1)) === undefined && (await idleInTransaction()) > 0,
      {
        message: 'the stuck handler to hold the row lock, idle in its transaction',
      },
    );
    const row = await waitFor(() => lockable(1), {
      timeoutMs: 10_000,
      message: 'a second transaction to get the row',
    });
    expect(row.v).toBe('a'); // rolled back, not committed
    await waitFor(async () => (await idleInTransaction()) === 0, {
      message: 'no session idle in transaction',
    });
    expect(warnings).toEqual([{ transactions: 1, marginMs: 200 }]);
    // never idle in its transaction past the function's timeout (1.5 s; rolled back at ~1.3 s)
    const longest = await sampled();
    expect(longest).toBeGreaterThan(0);
    expect(longest).toBeLessThan(1_500);
    void outcome;
  });

  it('the runtime killed (no middleware): the idle bound ends the transaction and frees its row', async () => {
    const sampled = longestIdleInTransaction();
    void stuckInTransaction(2).catch(() => {});
    await waitFor(
      async () => (await lockable(2)) === undefined && (await idleInTransaction()) > 0,
      {
        message: 'the stuck transaction to hold the row lock',
      },
    );
    const row = await waitFor(() => lockable(2), {
      timeoutMs: 10_000,
      message: 'the idle-in-transaction bound to free the row',
    });
    expect(row.v).toBe('b');
    expect(await idleInTransaction()).toBe(0);
    // no session idle in transaction longer than the bound (PostgreSQL's own timer ends it; the
    // sampling adds at most one interval)
    const longest = await sampled();
    expect(longest).toBeGreaterThan(0);
    expect(longest).toBeLessThanOrEqual(BOUNDS.idleInTransactionTimeoutMs + 100);
  });

  it('a lock wait is bounded: a transient error instead of waiting behind another transaction', async () => {
    await t.db.transaction(async (holder) => {
      await holder.query('SELECT 1 FROM cells WHERE id = 1 FOR UPDATE');
      const err = await db
        .transaction((tx) => tx.query("UPDATE cells SET v = 'x' WHERE id = 1"))
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(TransientDbError);
      expect((err as TransientDbError).code ?? (err as Error).message).toMatch(
        /55P03|lock timeout/,
      );
    });
  });
});
