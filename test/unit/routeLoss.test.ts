import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import type { Publisher } from '../../shared/index.js';
import { DEFAULT_RETENTION, OutboxRelay } from '../../shared/index.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { declaredTopology, type RabbitManagement } from '../../shared/transport/rabbitmq/index.js';
import { RouteCheck } from '../../shared/transport/rabbitmq/routes.js';
import { sqlRecorder } from '../helpers/sqlRecorder.js';

const ORDERS = RABBITMQ_NAMES.ordersExchange;
const INVENTORY = RABBITMQ_NAMES.inventoryQueue;
const STALE_MS = 20_000;
const MARGIN_MS = 5_000;
const LOOKBACK_MS = 600_000;
const { topology } = declaredTopology(PIPELINE_TOPOLOGY, TEST_RETRY_BUDGET, DEFAULT_RETENTION);

/**
 * What the route check records when it finds a consumer route missing (docs/design.md §4,
 * "Missing routes"): windows of markings to publish again, on the clock of the looks.
 */
describe('lost routes: the windows the route check records', () => {
  /** The bindings the fake management API answers for `orders` (all present at first). */
  let bindings: { destination: string; destination_type: string; routing_key: string }[];
  const all = () => [
    { destination: INVENTORY, destination_type: 'queue', routing_key: 'order.created' },
    { destination: INVENTORY, destination_type: 'queue', routing_key: 'order.cancelled' },
    { destination: RABBITMQ_NAMES.auditQueue, destination_type: 'queue', routing_key: 'order.#' },
  ];
  const loseCreated = () => {
    bindings = all().filter((b) => b.routing_key !== 'order.created');
  };
  const management = async () => ({ request: async () => bindings }) as unknown as RabbitManagement;
  const check = () =>
    new RouteCheck(
      { management, vhost: '/', topology },
      { staleMs: STALE_MS, marginMs: MARGIN_MS, lookbackMs: LOOKBACK_MS },
    );
  const at = (ms: number) => vi.setSystemTime(ms);
  const look = (c: RouteCheck) => c.status(ORDERS, 0);

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    bindings = all();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a route found missing: from the last look that saw it, to the end of every stale look; again at each look until then; once more when it is back', async () => {
    const c = check();
    at(1_000_000);
    await look(c);
    expect(c.takeLosses(ORDERS)).toEqual([]);
    at(1_010_000);
    await look(c); // the last look that saw it
    loseCreated();
    at(1_020_000);
    await look(c);
    const window = { from: 1_010_000 - MARGIN_MS, to: 1_020_000 + STALE_MS + MARGIN_MS };
    expect(c.takeLosses(ORDERS)).toEqual([
      { exchange: ORDERS, queue: INVENTORY, pattern: 'order.created', ...window },
    ]);
    // taken once
    expect(c.takeLosses(ORDERS)).toEqual([]);
    // the next looks record it again (rows other relays marked since), merged until taken
    at(1_021_000);
    await look(c);
    at(1_022_000);
    await look(c);
    expect(c.takeLosses(ORDERS)).toEqual([expect.objectContaining(window)]);
    // back: once more, then nothing
    bindings = all();
    at(1_030_000);
    await look(c);
    expect(c.takeLosses(ORDERS)).toEqual([expect.objectContaining(window)]);
    at(1_031_000);
    await look(c);
    expect(c.takeLosses(ORDERS)).toEqual([]);
    // lost again: a new window from the look that saw it back
    loseCreated();
    at(1_040_000);
    await look(c);
    expect(c.takeLosses(ORDERS)).toEqual([
      expect.objectContaining({
        from: 1_031_000 - MARGIN_MS,
        to: 1_040_000 + STALE_MS + MARGIN_MS,
      }),
    ]);
  });

  it('a route missing past the end of its window: the first look after it covers it, later ones record nothing, nor does the return', async () => {
    const c = check();
    at(2_000_000);
    await look(c);
    loseCreated();
    at(2_001_000);
    await look(c);
    c.takeLosses(ORDERS);
    at(2_001_000 + STALE_MS + MARGIN_MS + 1);
    await look(c);
    expect(c.takeLosses(ORDERS)).toHaveLength(1);
    at(2_100_000);
    await look(c);
    bindings = all();
    at(2_200_000);
    await look(c);
    expect(c.takeLosses(ORDERS)).toEqual([]);
  });

  it('a process that never saw the route present goes back the lookback; a loss given back is taken again', async () => {
    const c = check();
    loseCreated();
    at(3_000_000);
    await look(c);
    const [loss] = c.takeLosses(ORDERS);
    expect(loss).toMatchObject({ from: 3_000_000 - LOOKBACK_MS - MARGIN_MS });
    c.returnLosses(loss ? [loss] : []);
    expect(c.takeLosses(ORDERS)).toEqual([loss]);
  });

  it('a look that could not be made changes nothing', async () => {
    const c = new RouteCheck({ management: undefined, vhost: '/', topology });
    at(4_000_000);
    expect(await look(c)).toBeUndefined();
    expect(c.takeLosses(ORDERS)).toEqual([]);
  });

  it('a publisher without routes (SQS, in-memory): the relay puts nothing back and runs no statement for it', async () => {
    const { ex, seen } = sqlRecorder();
    const publisher: Publisher = {
      ready: async () => {},
      close: async () => {},
      publish: async () => [],
    };
    const relay = new OutboxRelay(
      {
        db: { ...ex, transaction: async () => undefined as never, close: async () => {} },
        publisher,
      },
      { table: 'outbox', batchSize: 10, maxAttempts: 3 },
    );
    expect(await relay.republishLost()).toBe(0);
    expect(seen).toEqual([]);
  });
});
