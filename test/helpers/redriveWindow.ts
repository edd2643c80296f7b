import { expect } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import type { ParkedEntry } from '../../shared/index.js';
import type { ConsumerRig } from './inventory.js';

/**
 * The redrive-window scenario, on any rig: the database is down throughout; an order whose
 * `occurred_at` lies beyond the retry window is parked `max_age` at once; redriven, it gets the
 * whole ladder again (a fresh window from the redrive, same event id) and is parked `exhausted`,
 * its diagnosis and journal saying it was redriven once.
 */
export async function redriveStartsAFreshWindow(b: ConsumerRig): Promise<void> {
  await b.stock('SKU-W', 10);
  const { db, proxy } = await b.proxiedDb();
  await b.start({ db });
  proxy.cut(); // the database stays down
  const old = b.orderCreated('SKU-W', 1, {
    occurred_at: new Date(Date.now() - 2 * b.budget.maxAgeMs).toISOString(),
  });
  await b.publish(old);
  const parkedNow = async () =>
    (await b.parked()).find((p: ParkedEntry) => p.diagnosis.messageId === old.id);
  const first = await waitFor(parkedNow, { timeoutMs: 20_000, message: 'parked for its age' });
  expect(first.diagnosis).toMatchObject({ reason: 'max_age', attempts: 0 });
  expect(first.diagnosis.redriveCount ?? 0).toBe(0);

  const result = await b.backend.parkingLot().redrive({ ids: [old.id] });
  expect(result.moved).toEqual([old.id]);

  // the whole ladder again, then parked as exhausted (not at once for its age)
  await b.waitForLine(old.id, 'retry-scheduled', b.budget.maxAttempts, 40_000);
  const again = await waitFor(parkedNow, { timeoutMs: 40_000, message: 'parked again' });
  expect(again.diagnosis).toMatchObject({
    messageId: old.id,
    reason: 'exhausted',
    attempts: b.budget.maxAttempts,
    redriveCount: 1,
  });
  expect(Date.parse(again.diagnosis.lastRedriveAt ?? '')).toBeGreaterThan(
    Date.parse(old.occurred_at),
  );
  // the consumer journals the park once the parking lot has the copy
  await b.waitForLine(old.id, 'parked', 2);
  const parkedLines = b.linesFor(old.id).filter((l) => l.step === 'parked');
  expect(parkedLines.map((l) => [l.outcome, l.redrives])).toEqual([
    ['max_age', undefined],
    ['exhausted', 1],
  ]);
}
