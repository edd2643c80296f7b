import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { DEFAULT_RETENTION } from '../../shared/index.js';
import { RABBITMQ_NAMES, RETRY_NAMES, retryQueueName } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { declaredTopology } from '../../shared/transport/rabbitmq/index.js';
import { applyPolicies } from '../../shared/transport/rabbitmq/topology.js';
import { RABBITMQ_RIG } from '../helpers/consumerRigs.js';
import type { InventoryRig } from '../helpers/inventory.js';

/**
 * What only RabbitMQ has: a retry waits in one of a set of delay queues (not a delay per message),
 * dead-lettered back to the consumer's queue through the requeue exchange. The database faults
 * every transport runs are in reserve.faults.test.ts.
 */
describe.each([RABBITMQ_RIG])('reserve inventory ($name): retry queues broken', (h) => {
  let b: InventoryRig;
  afterEach(() => b?.close());

  it('retry binding removed: the retry publish is returned, the original is not acked, reconnects are bounded', async () => {
    b = await h.setup('reserve_retry_unbound');
    await b.stock('SKU-A', 10);
    const first = retryQueueName(b.budget.ladderMs[0] as number);
    await b.backend.withChannel((ch) =>
      ch.unbindQueue(first, RETRY_NAMES.retryExchange, String(b.budget.ladderMs[0])),
    );
    const { db, proxy } = await b.proxiedDb();
    const worker = await b.worker({ db });
    proxy.cut();
    const e = b.orderCreated('SKU-A', 1);
    await b.publish(e);

    const started = Date.now();
    await waitFor(
      () =>
        b.linesFor(e.id).filter((l) => l.step === 'abandoned' || l.step === 'received').length >= 6,
      {
        timeoutMs: 20_000,
        message: 'several give-ups',
      },
    );
    const elapsed = Date.now() - started;
    expect(b.linesFor(e.id).some((l) => l.step === 'acked')).toBe(false);
    // backoff 100 ms → 1 s (jittered): far fewer reconnects than a hot loop would make
    expect(worker.reconnects).toBeGreaterThanOrEqual(2);
    expect(worker.reconnects).toBeLessThanOrEqual(Math.ceil(elapsed / 50));
    const receivedSoFar = b.linesFor(e.id).filter((l) => l.step === 'received').length;
    expect(receivedSoFar).toBeLessThanOrEqual(worker.reconnects + 1); // one delivery per reconnect

    // fix both causes: the message was never lost and is processed once
    await b.backend.withChannel((ch) =>
      ch.bindQueue(first, RETRY_NAMES.retryExchange, String(b.budget.ladderMs[0])),
    );
    proxy.restore();
    await b.waitForLine(e.id, 'effect-committed', 1, 20_000);
    expect(await b.reservation(e.aggregate.id)).toMatchObject({ status: 'reserved' });
    expect(await b.inboxRows(e.id)).toBe(1);
  });

  it('requeue route gone: a retry queue holds its expired copies up to its bound, then refuses the copy and the message is given back, never acked; inspect() counts the held copies; restored, each order is reserved once', async () => {
    b = await h.setup('reserve_retry_bound');
    await b.stock('SKU-A', 10);
    const delay = b.budget.ladderMs[0] as number;
    const first = retryQueueName(delay);
    const policy = declaredTopology(PIPELINE_TOPOLOGY, b.budget, DEFAULT_RETENTION).policies.find(
      (p) => p.name === first,
    );
    if (!policy) throw new Error(`no policy for ${first}`);
    expect(policy.definition).toMatchObject({ 'max-length': 100_000, overflow: 'reject-publish' });
    // the same policy with a bound of 2, to reach it
    await applyPolicies(b.vhost.management, b.vhost.vhost, [
      { ...policy, definition: { ...policy.definition, 'max-length': 2 } },
    ]);
    await b.backend.withChannel((ch) =>
      ch.unbindQueue(
        RABBITMQ_NAMES.inventoryQueue,
        RETRY_NAMES.requeueExchange,
        RETRY_NAMES.requeueRoutingKey,
      ),
    );
    const { db, proxy } = await b.proxiedDb();
    proxy.cut();
    const worker = await b.worker({ db, prefetch: 1, maxBatch: 1 });
    const events = Array.from({ length: 5 }, () => b.orderCreated('SKU-A', 1));
    await b.publish(...events);

    const lines = (step: string) =>
      events.flatMap((e) => b.linesFor(e.id)).filter((l) => l.step === step);
    // the first copies are confirmed and held (expired, with nowhere to go); then the bound bites:
    // the next copy is refused, so its message is given back (delivered again, never acked)
    const givenBack = () =>
      events.find((e) => {
        const own = b.linesFor(e.id);
        return (
          own.filter((l) => l.step === 'received').length >= 2 &&
          !own.some((l) => l.step === 'acked')
        );
      });
    await waitFor(givenBack, {
      timeoutMs: 20_000,
      message: 'a retry copy refused at the bound, its message given back',
    });
    await worker.stop(); // before the quorum queue's delivery limit parks it
    expect(worker.stats.givenBack).toBeGreaterThanOrEqual(1);
    const scheduled = lines('retry-scheduled').length;
    expect(scheduled).toBeGreaterThanOrEqual(2);
    expect(scheduled).toBeLessThanOrEqual(3); // a quorum queue's bound is approximate by one
    expect(lines('acked').length).toBe(scheduled); // an original is acked only once its copy is confirmed
    // once expired, none is ready: they are held for dead lettering, and still what the bound
    // counts; the relay publishes ready + held for the alarm
    await waitFor(async () => (await b.depth(first)) === 0, {
      timeoutMs: 15_000,
      message: `the copies in ${first} expired`,
    });
    const inspected = await waitFor(
      async () => {
        const i = await b.backend.inspect();
        return (i.bounded?.[first] ?? 0) >= scheduled ? i : undefined;
      },
      { timeoutMs: 15_000, message: `inspect() counts the copies held in ${first}` },
    );
    expect(inspected.bounded?.[first]).toBe(scheduled);

    // restored: the route, the policy (re-applying it makes RabbitMQ retry the held dead
    // letters at once) and the database; nothing was lost, each order reserved once
    await b.backend.withChannel((ch) =>
      ch.bindQueue(
        RABBITMQ_NAMES.inventoryQueue,
        RETRY_NAMES.requeueExchange,
        RETRY_NAMES.requeueRoutingKey,
      ),
    );
    await b.backend.applyPolicies({ only: [first] });
    proxy.restore();
    await b.worker({ db });
    for (const e of events) await b.waitForLine(e.id, 'effect-committed', 1, 30_000);
    for (const e of events) {
      expect(await b.reservation(e.aggregate.id)).toMatchObject({ status: 'reserved' });
      expect(await b.inboxRows(e.id)).toBe(1);
    }
  });
});
