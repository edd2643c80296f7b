import { setTimeout as sleep } from 'node:timers/promises';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import type { Service } from '../shared/pipeline/schema.js';
import type { Plan } from './plan.js';

/**
 * Waits until the pipeline has drained: both outboxes published (but for rows needing attention:
 * the bad rows the relay set aside; verify says whether those are the expected ones), nothing left in the consumer's
 * queues, and every valid order decided and every poison event parked; or until nothing has moved
 * for a while (stuck: verification says what is missing); or the timeout.
 */
export async function drain(
  o: { transport: string; drainTimeoutMs: number; progress: (line: string) => void },
  dbs: Readonly<Record<Service, PgDatabase>>,
  plan: Plan,
  queueDepth: () => Promise<number>,
): Promise<void> {
  const valid = plan.orders.filter((x) => !x.poison).length;
  const deadline = Date.now() + o.drainTimeoutMs;
  let lastKey = '';
  let lastChange = Date.now();
  let lastReport = 0;
  while (Date.now() < deadline) {
    let state: { unpublished: number; decided: number; depth: number };
    try {
      // each service's database: the order service's outbox; inventory's outbox and decisions
      const orders = await dbs.orders.query<{ unpublished: number }>(
        `SELECT count(*)::int AS unpublished FROM outbox
          WHERE published_at IS NULL AND needs_attention_at IS NULL`,
      );
      const inventory = await dbs.inventory.query<{ unpublished: number; decided: number }>(
        `SELECT (SELECT count(*) FROM inventory_outbox
                  WHERE published_at IS NULL AND needs_attention_at IS NULL)::int AS unpublished,
                (SELECT count(*) FROM reservations)::int AS decided`,
      );
      const o1 = orders.rows[0]?.unpublished;
      const o2 = inventory.rows[0]?.unpublished;
      state = {
        unpublished: o1 === undefined || o2 === undefined ? -1 : o1 + o2,
        decided: inventory.rows[0]?.decided ?? -1,
        depth: await queueDepth(),
      };
    } catch (err) {
      o.progress(`[${o.transport}] drain: ${(err as Error).message} (again)`);
      await sleep(1_000);
      continue;
    }
    const key = JSON.stringify(state);
    if (key !== lastKey) {
      lastKey = key;
      lastChange = Date.now();
    }
    if (Date.now() - lastReport > 5_000) {
      lastReport = Date.now();
      o.progress(
        `[${o.transport}] draining: ${state.decided}/${valid} decided, ${state.unpublished} unpublished, ${state.depth} in queues`,
      );
    }
    if (state.unpublished === 0 && state.depth === 0 && state.decided >= valid) return;
    // nothing moves with empty queues and outboxes: stuck; verification says what is missing
    if (state.unpublished === 0 && state.depth === 0 && Date.now() - lastChange > 20_000) return;
    await sleep(1_000);
  }
  o.progress(`[${o.transport}] drain timed out after ${o.drainTimeoutMs / 1000} s`);
}
