import { setTimeout as sleep } from 'node:timers/promises';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { round1 } from './load.js';

/**
 * What the end-to-end benchmark reads from the database: the pipeline's figures for a window of
 * orders, from the database's own timestamps, and the backlog of orders not reserved yet.
 */
export interface WindowStats {
  orders: number;
  reserved: number;
  /** Reservations committed per second inside the window. */
  throughput: number;
  e2eMs: { p50: number; p99: number; max: number };
  lagMs: { p50: number; p99: number; max: number };
}

/** The pipeline's figures for orders placed in [from, to), from the database's own timestamps. */
export async function windowStats(db: PgDatabase, from: Date, to: Date): Promise<WindowStats> {
  const { rows } = await db.query<{
    orders: string;
    reserved: string;
    committed: string;
    e2e: (number | null)[] | null;
    lag: (number | null)[] | null;
  }>(
    `WITH w AS (
       SELECT o.occurred_at, o.published_at, r.created_at AS reserved_at
         FROM outbox o
         LEFT JOIN reservations r ON r.order_id = o.aggregate_id::uuid
        WHERE o.aggregate_type = 'order' AND o.aggregate_version = 1
          AND o.occurred_at >= $1 AND o.occurred_at < $2)
     SELECT count(*) AS orders, count(reserved_at) AS reserved,
            (SELECT count(*) FROM reservations WHERE created_at >= $1 AND created_at < $2) AS committed,
            percentile_disc(ARRAY[0.5, 0.99, 1]) WITHIN GROUP
              (ORDER BY extract(epoch FROM reserved_at - occurred_at) * 1000) AS e2e,
            percentile_disc(ARRAY[0.5, 0.99, 1]) WITHIN GROUP
              (ORDER BY extract(epoch FROM published_at - occurred_at) * 1000) AS lag
       FROM w`,
    [from, to],
  );
  const r = rows[0];
  const ms = (a: (number | null)[] | null | undefined) => ({
    p50: round1(Number(a?.[0] ?? Number.NaN)),
    p99: round1(Number(a?.[1] ?? Number.NaN)),
    max: round1(Number(a?.[2] ?? Number.NaN)),
  });
  return {
    orders: Number(r?.orders ?? 0),
    reserved: Number(r?.reserved ?? 0),
    throughput: round1(Number(r?.committed ?? 0) / ((to.getTime() - from.getTime()) / 1000)),
    e2eMs: ms(r?.e2e),
    lagMs: ms(r?.lag),
  };
}

/** Orders not reserved yet (in the outbox, the broker or the consumer), and unpublished rows. */
export async function backlog(db: PgDatabase): Promise<{ pending: number; unpublished: number }> {
  const { rows } = await db.query<{ pending: string; unpublished: string }>(
    `SELECT (SELECT count(*) FROM orders) - (SELECT count(*) FROM reservations) AS pending,
            (SELECT count(*) FROM outbox WHERE published_at IS NULL) AS unpublished`,
  );
  return { pending: Number(rows[0]?.pending), unpublished: Number(rows[0]?.unpublished) };
}

export async function drained(db: PgDatabase, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if ((await backlog(db)).pending <= 0) return true;
    await sleep(250);
  }
  return false;
}
