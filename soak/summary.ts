import type { SoakReport } from './soak.js';

/** The human-readable summary of one transport's run. */
export function summary(r: SoakReport): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  // what a fault did rather than a fault: connections it ended, resumes and calls it refused
  const effects = new Set(['db-connections-terminated', 'db-resumes', 'db-calls-refused']);
  const injected = Object.entries(r.faults).filter(
    ([k]) => !effects.has(k) && !k.endsWith(':mid-transaction'),
  );
  const faults = injected.map(([k, v]) => `${k} ${v}`).join(', ');
  const totalFaults = injected.reduce((a, [, v]) => a + v, 0);
  const lines = [
    '',
    `== soak on ${r.transport}${r.settings.consumer ? ` (${r.settings.consumer})` : ''}: ${r.ok ? 'PASSED' : 'FAILED'} (seed ${r.seed}) ==`,
    `orders       ${r.orders.planned} planned (${r.orders.valid} valid, ${r.orders.poison} poison), ${r.orders.inDatabase} in the database`,
    `outcomes     reserved ${r.outcomes.reserved}, rejected ${r.outcomes.rejected.out_of_stock + r.outcomes.rejected.unknown_sku} (out_of_stock ${r.outcomes.rejected.out_of_stock}, unknown_sku ${r.outcomes.rejected.unknown_sku}), parked ${r.outcomes.parked.poison + r.outcomes.parked.valid} (poison ${r.outcomes.parked.poison}, valid ${r.outcomes.parked.valid}), undecided ${r.outcomes.undecided}`,
    `parking      ${r.parking.messages} messages, ${r.parking.distinctIds} distinct ids: ${JSON.stringify(r.parking.byReason)}`,
    `duplicates   ${r.duplicates.absorbedByInbox} redeliveries absorbed by the inbox; effects twice ${r.duplicates.doubleEffects}, reservations twice ${r.duplicates.doubleReservations}`,
    `stock        ${r.stock.skus} SKUs: initial ${r.stock.initialUnits} − reserved ${r.stock.reservedUnits} = free ${r.stock.freeUnits}; mismatches ${r.stock.mismatches.length}`,
    `outbox       ${r.outbox.rows} rows, unpublished ${r.outbox.unpublished}, need attention ${r.outbox.needsAttention}; inventory_outbox ${r.outbox.inventoryRows} rows, unpublished ${r.outbox.inventoryUnpublished}`,
    `bad rows     ${r.outbox.badRows} written, ${r.outbox.setAside} set aside by the relay${r.outbox.setAsideReasons.length ? `: ${r.outbox.setAsideReasons.join('; ')}` : ''}`,
    `faults       ${totalFaults}: ${faults}; ${r.faults['db-connections-terminated'] ?? 0} database connections terminated${r.faults['db-resumes'] !== undefined ? `; the cluster resumed ${r.faults['db-resumes']}× (${r.faults['db-calls-refused'] ?? 0} Data API calls refused meanwhile)` : ''}`,
    `placement    ${r.placement.requests} HTTP requests, ${r.placement.retries} retries, ${r.placement.idempotentRepeats} idempotent repeats (200), ${r.placement.refused.length} refused`,
    `self-exits   ${r.selfExits.length}${r.selfExits.length ? ` (${selfExitCounts(r.selfExits)})` : ''}`,
    `time         total ${s(r.timings.totalMs)}: startup ${s(r.timings.startupMs)}, placement ${s(r.timings.placementMs)}, fault phase ${s(r.timings.faultPhaseMs)}, drain ${s(r.timings.drainMs)}`,
  ];
  for (const w of r.warnings.slice(0, 5)) lines.push(`warning      ${w}`);
  for (const v of r.violations) lines.push(`VIOLATION    ${v}`);
  return lines.join('\n');
}

/** `relay exit 2 ×12, consumer exit 2 ×12`: how often each role ended on its own, and how. */
function selfExitCounts(
  exits: readonly { role: string; code?: number | null; signal?: string | null }[],
): string {
  const counts = new Map<string, number>();
  for (const e of exits) {
    const key = `${e.role} ${e.code != null ? `exit ${e.code}` : `signal ${e.signal}`}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([key, n]) => `${key} ×${n}`).join(', ');
}
