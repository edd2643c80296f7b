import pg from 'pg';
import { sleep } from '../../shared/util/async.js';
import type { Rig } from '../rigs/index.js';
import type { Scenario } from '../scenario.js';
import { check } from '../types.js';
import { ms, noDoubleEffect, placeOrders } from './common.js';

const PHASE_ORDERS = 60;
/** Orders are placed in 6 steps this far apart: a flow, not a burst. */
const STEP_MS = 300;

interface Phase {
  relayLagMs: { p50: number; p99: number };
  reserveMs: { p50: number; p99: number };
}

const quantile = (xs: number[], q: number) => {
  if (xs.length === 0) return Number.NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
};

/** `PHASE_ORDERS` orders as a steady flow; the relay's lag and the time to each effect. */
async function phase(rig: Rig, sku: string): Promise<Phase> {
  const placed: { orderId: string; eventId: string }[] = [];
  const step = PHASE_ORDERS / 6;
  for (let i = 0; i < 6; i++) {
    placed.push(...(await placeOrders(rig, step, () => ({ sku, quantity: 1 }))));
    await sleep(STEP_MS);
  }
  const ids = placed.map((p) => p.eventId);
  await rig.waitSettled(ids);
  const { rows } = await rig.ordersDb.query<{ lag: number }>(
    `SELECT extract(epoch FROM (published_at - occurred_at)) * 1000 AS lag
       FROM outbox WHERE id::text = ANY(string_to_array($1, ',')) AND published_at IS NOT NULL`,
    [ids.join(',')],
  );
  const lags = rows.map((r) => Number(r.lag));
  const reserve = ids.flatMap((id) => {
    const at = rig.run.accepted.get(id)?.at;
    const committed = rig.run.linesOf(id, 'effect-committed')[0]?.at;
    return at !== undefined && committed !== undefined ? [committed - at] : [];
  });
  return {
    relayLagMs: { p50: quantile(lags, 0.5), p99: quantile(lags, 0.99) },
    reserveMs: { p50: quantile(reserve, 0.5), p99: quantile(reserve, 0.99) },
  };
}

/** Dead tuples in `outbox` after a VACUUM: the ones it could not remove. */
async function deadAfterVacuum(rig: Rig): Promise<number> {
  await rig.ordersDb.query('VACUUM outbox');
  const { rows } = await rig.ordersDb.query<{ n: string }>(
    "SELECT n_dead_tup AS n FROM pg_stat_user_tables WHERE relname = 'outbox'",
  );
  return Number(rows[0]?.n ?? 0);
}

/** A session holds its snapshot open for the whole flow: vacuum removes nothing newer. */
export const pinnedXmin: Scenario = {
  id: 'pinned-xmin',
  alone: true,
  title: 'Pinned database horizon (idle in transaction)',
  stimulus: `${PHASE_ORDERS} orders as a steady flow; then a session opens a REPEATABLE READ transaction, reads the outbox and stays idle in it while ${PHASE_ORDERS} more flow (VACUUM cannot remove any row version newer than its snapshot); then it ends and ${PHASE_ORDERS} more flow.`,
  invariant:
    'Every order decided exactly once in every phase; the relay lag and the time to reserve are measured before, during and after the pin.',
  async run(rig) {
    await rig.database.stock('SKU-X', 10_000);
    await rig.startConsumer();
    const relay = rig.producer.relayLoop(rig.producer.relay(), rig.settings.waitMs * 4);
    const pin = new pg.Client({ connectionString: rig.scratch.databases.orders.url });
    await pin.connect();
    try {
      rig.run.begin();
      rig.facts.before = await phase(rig, 'SKU-X');
      await pin.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await pin.query('SELECT count(*) FROM outbox');
      rig.run.mark('horizon pinned: a session idle in a REPEATABLE READ transaction', 'fault');
      rig.facts.during = await phase(rig, 'SKU-X');
      rig.facts.deadDuring = await deadAfterVacuum(rig);
      await pin.query('ROLLBACK');
      rig.run.faultEnded('the pinning transaction ended');
      rig.facts.deadAfter = await deadAfterVacuum(rig);
      rig.facts.after = await phase(rig, 'SKU-X');
    } finally {
      await pin.end().catch(() => {});
      await relay.stop();
    }
  },
  check(rig, m) {
    const during = Number(rig.facts.deadDuring);
    const after = Number(rig.facts.deadAfter);
    return [
      check(
        m.effects === 3 * PHASE_ORDERS,
        `${3 * PHASE_ORDERS} orders decided (got ${m.effects})`,
      ),
      check(m.outboxUnpublished === 0, 'the outbox drained in every phase'),
      check(during > 0, `the pin held dead row versions VACUUM could not remove (${during})`),
      check(after < during, `once it ended VACUUM removed them (${during} → ${after})`),
      ...noDoubleEffect(m),
    ];
  },
  note: (rig) => {
    const f = (p: Phase) =>
      `relay lag ${ms(p.relayLagMs.p50)}/${ms(p.relayLagMs.p99)}, reserve ${ms(p.reserveMs.p50)}/${ms(p.reserveMs.p99)}`;
    const [before, during, after] = [
      rig.facts.before,
      rig.facts.during,
      rig.facts.after,
    ] as Phase[];
    if (!before || !during || !after) return 'did not finish';
    return `p50/p99 before: ${f(before)}; pinned: ${f(during)}; after: ${f(after)}; outbox dead row versions VACUUM could not remove while pinned: ${rig.facts.deadDuring}, after: ${rig.facts.deadAfter}`;
  },
};
