import type { ScheduledEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localLambdaContext } from '../../devkit/triggers/lambdaContext.js';
import type { RouteLoss } from '../../shared/index.js';
import {
  createLogger,
  loadEnv,
  MemoryRelayStateStore,
  publishOutboxMetrics,
  relayLambdaHandler,
} from '../../shared/index.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { OUTBOX_METRICS } from '../../shared/outbox/metrics.js';
import { createRelays } from '../../shared/pipeline/relays.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { memoryBackend } from '../../shared/transport/memory/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { captureEmf } from '../helpers/emf.js';

const tick: ScheduledEvent = {
  version: '0',
  id: 'e6b3b8a0-0000-4000-8000-000000000001',
  'detail-type': 'Scheduled Event',
  source: 'aws.events',
  account: '000000000000',
  time: new Date().toISOString(),
  region: 'eu-west-1',
  resources: ['arn:aws:events:eu-west-1:000000000000:rule/outbox-relay'],
  detail: {},
};

/**
 * The deployed relay and a lost route (docs/design.md §4, "Missing routes"): a loss the route
 * check recorded after the last round (on Amazon MQ the minute report looks at the routes) is
 * acted on by the next invocation, a tick included: the rows go back, `OutboxRepublished` counts
 * them, and the state says rows are left, so the next tick sweeps and publishes them.
 */
describe('outbox-relay handler: rows of a lost route', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase('relay_route_loss_handler');
  });
  afterAll(() => t?.drop());

  it('a tick puts them back and counts them; the next tick sweeps and publishes them', async () => {
    const orders = new OrderService({ db: t.db });
    for (let i = 0; i < 3; i++)
      await orders.place({ sku: 'sku-1', quantity: 1, correlationId: `lost-${i}` });
    await t.db.query('UPDATE outbox SET published_at = now()');
    // the route check of the orders exchange recorded one loss (taken once)
    let pending: RouteLoss[] = [
      {
        eventTypes: (type) => type === 'order.created',
        from: new Date(Date.now() - 60_000),
        to: new Date(Date.now() + 60_000),
        reason: 'no binding orders → inventory.orders (order.created) on the broker',
      },
    ];
    const memory = memoryBackend({ topology: PIPELINE_TOPOLOGY });
    await memory.prepare();
    const backend = {
      publisher: (stream: string) => {
        const p = memory.publisher(stream);
        if (stream !== 'outbox') return p;
        return {
          publish: (e: Parameters<typeof p.publish>[0]) => p.publish(e),
          ready: (ms?: number) => p.ready(ms),
          close: () => p.close(),
          takeRouteLosses: () => {
            const taken = pending;
            pending = [];
            return taken;
          },
          returnRouteLosses: (back: readonly RouteLoss[]) => {
            pending = [...pending, ...back];
          },
        };
      },
    };
    const logger = createLogger('outbox-relay-test');
    const relays = createRelays({ db: t.db, backend }, loadEnv({}));
    const state = new MemoryRelayStateStore();
    const now = Date.now();
    state.state = { lastCheckAt: now, lastActivityAt: now, pending: false };
    const handler = relayLambdaHandler(
      {
        relays,
        logger,
        report: (results, read) =>
          publishOutboxMetrics(read ? t.db : undefined, relays, results, logger),
      },
      {
        drainBudgetMs: 50_000,
        idleWaitMs: 20,
        safetyMarginMs: 500,
        kicked: { lingerMs: 300, sweep: { quietMs: 600_000, intervalMs: 3_600_000 }, state },
      },
    );

    let summary: Awaited<ReturnType<typeof handler>> | undefined;
    const { byOutbox: metrics } = await captureEmf(async () => {
      summary = await handler(tick, localLambdaContext('outbox-relay', 60_000));
    });
    expect(summary).toMatchObject({ mode: 'tick', outbox: { republished: 3, rounds: 0 } });
    expect(metrics.get('outbox')?.[OUTBOX_METRICS.republished]).toBe(3);
    expect(metrics.get('inventory_outbox')?.[OUTBOX_METRICS.republished]).toBe(0);
    expect(state.state?.pending).toBe(true);
    const { rows } = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL AND attempts = 0',
    );
    expect(rows[0]?.n).toBe(3);

    // the next tick sweeps: published again, nothing left
    const next = await handler(tick, localLambdaContext('outbox-relay', 60_000));
    expect(next).toMatchObject({ mode: 'sweep', outbox: { published: 3, republished: 0 } });
    expect(state.state?.pending).toBe(false);
  });
});
