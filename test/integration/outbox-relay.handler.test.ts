import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ScheduledEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratch, type ScratchEnvironment } from '../../devkit/scratch.js';
import { localLambdaContext } from '../../devkit/triggers/lambdaContext.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { FaultScope } from '../../shared/config/faults.js';
import {
  createLogger,
  DEFAULT_RETENTION,
  loadEnv,
  MemoryRelayStateStore,
  publishOutboxMetrics,
  relayLambdaHandler,
} from '../../shared/index.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { DRAIN_SOURCE, KICK_SOURCE } from '../../shared/outbox/kick.js';
import { OUTBOX_METRICS } from '../../shared/outbox/metrics.js';
import { createRelays } from '../../shared/pipeline/relays.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { memoryBackend } from '../../shared/transport/memory/index.js';
import type { RabbitMqBackend } from '../../shared/transport/rabbitmq/index.js';
import { createTestDatabase, proxiedDatabase, type TestDatabase } from '../helpers/db.js';
import { captureEmf } from '../helpers/emf.js';
import { DATABASE_URL, RABBITMQ_MANAGEMENT_URL, SERVICES } from '../helpers/services.js';
import { SQS_SERVERS } from '../helpers/sqs.js';

const scheduledEvent: ScheduledEvent = {
  version: '0',
  id: 'e6b3b8a0-0000-4000-8000-000000000000',
  'detail-type': 'Scheduled Event',
  source: 'aws.events',
  account: '000000000000',
  time: new Date().toISOString(),
  region: 'eu-west-1',
  resources: ['arn:aws:events:eu-west-1:000000000000:rule/outbox-relay'],
  detail: {},
};

describe('outbox-relay Lambda handler (EventBridge schedule)', () => {
  let scratch: ScratchEnvironment;
  let backend: RabbitMqBackend;

  beforeAll(async () => {
    scratch = await createScratch(SERVICES, 'relay_handler');
    backend = scratch.backend('rabbitmq', {
      budget: TEST_RETRY_BUDGET,
      retention: DEFAULT_RETENTION,
      topology: PIPELINE_TOPOLOGY,
      consumer: 'relay-handler-test',
    });
  });
  afterAll(() => scratch?.close());

  it('declares the topology once, then drains both outboxes for its budget, bounded by the time left', async () => {
    const db = scratch.database.db;
    const orders = new OrderService({ db });
    for (let i = 0; i < 30; i++)
      await orders.place({ sku: 'sku-1', quantity: 1, correlationId: `c${i}` });
    const env = loadEnv({});
    let prepared = 0;
    const handler = relayLambdaHandler(
      {
        relays: createRelays({ db, backend }, env),
        logger: createLogger('outbox-relay-test'),
        prepare: async () => {
          prepared++;
          await backend.prepare('publish');
        },
      },
      { drainBudgetMs: 60_000, idleWaitMs: 20, concurrency: 2, safetyMarginMs: 500 },
    );
    const started = Date.now();
    // a 1.5 s function timeout leaves a 1 s drain budget: the handler must stop by itself
    const summary = await handler(scheduledEvent, localLambdaContext('outbox-relay', 1_500));
    const elapsed = Date.now() - started;

    expect(summary.outbox?.published).toBe(30);
    expect(summary.inventory_outbox?.published).toBe(0);
    expect(elapsed).toBeLessThan(5_000);
    expect((await backend.inspect()).ready).toBe(30); // inventory.orders
    // a second invocation of the same container declares nothing again
    await handler(scheduledEvent, localLambdaContext('outbox-relay', 1_500));
    expect(prepared).toBe(1);
  });
});

describe('relay metrics (CloudWatch EMF, for the alarms)', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase('relay_metrics');
  });
  afterAll(() => t?.drop());

  it('publishes each outbox backlog, oldest unpublished age and rows needing attention', async () => {
    const orders = new OrderService({ db: t.db });
    for (let i = 0; i < 3; i++)
      await orders.place({ sku: 'sku-1', quantity: 1, correlationId: `m${i}` });
    await t.db.query(`UPDATE outbox SET occurred_at = now() - interval '90 seconds'`);
    await t.db.query(
      `UPDATE outbox SET needs_attention_at = now() WHERE id = (SELECT id FROM outbox ORDER BY occurred_at LIMIT 1)`,
    );
    // the metrics read the outbox tables only: no broker is needed behind the relays
    const relays = createRelays(
      { db: t.db, backend: memoryBackend({ topology: PIPELINE_TOPOLOGY }) },
      loadEnv({}),
    );
    const { docs, byOutbox } = await captureEmf(() =>
      publishOutboxMetrics(t.db, relays, [
        { published: 7, failed: 1, setAside: 2, roundErrors: 3 },
        { published: 0, failed: 0 },
      ]),
    );
    const outbox = byOutbox.get('outbox');
    expect(outbox).toMatchObject({
      OutboxBacklog: 2,
      OutboxNeedsAttention: 1,
      OutboxPublished: 7,
      OutboxPublishFailures: 1,
      OutboxSetAside: 2,
      RelayRoundErrors: 3,
      RelayHeartbeat: 1,
    });
    expect(outbox?.OutboxOldestUnpublishedAgeSeconds).toBeGreaterThanOrEqual(89);
    expect(byOutbox.get('inventory_outbox')).toMatchObject({
      OutboxBacklog: 0,
      RelayHeartbeat: 1,
      RelayRoundErrors: 0,
    });
    expect(docs.every((d) => d.service === 'outbox-relay')).toBe(true);
    const aws = docs[0]?._aws as { CloudWatchMetrics: { Namespace: string }[] } | undefined;
    expect(aws?.CloudWatchMetrics[0]?.Namespace).toBe('ReliableMessaging');
  });
});

describe('relay heartbeat and round errors (every invocation, every outbox)', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase('relay_heartbeat');
  });
  afterAll(() => t?.drop());

  /** The deployed handler's wiring (functions/outbox-relay/index.ts) on `db`, without a broker. */
  const relayHandler = (db: typeof t.db) => {
    const logger = createLogger('outbox-relay-test');
    const relays = createRelays(
      { db, backend: memoryBackend({ topology: PIPELINE_TOPOLOGY }) },
      loadEnv({}),
    );
    return relayLambdaHandler(
      { relays, logger, report: (results) => publishOutboxMetrics(db, relays, results, logger) },
      { drainBudgetMs: 60_000, idleWaitMs: 20, safetyMarginMs: 500 },
    );
  };

  it('the database is unreachable: every round and the backlog query fail, the heartbeat and the round errors still go out', async () => {
    const broken = await proxiedDatabase(t.url);
    try {
      broken.proxy.cut();
      const handler = relayHandler(broken.db);
      let summary: Awaited<ReturnType<typeof handler>> | undefined;
      const { byOutbox } = await captureEmf(async () => {
        summary = await handler(scheduledEvent, localLambdaContext('outbox-relay', 1_500));
      });
      for (const table of ['outbox', 'inventory_outbox'] as const) {
        expect(summary?.[table]?.roundErrors, table).toBeGreaterThanOrEqual(1);
        expect(summary?.[table]?.rounds, table).toBe(0);
        const m = byOutbox.get(table);
        expect(m?.[OUTBOX_METRICS.heartbeat], table).toBe(1);
        expect(m?.[OUTBOX_METRICS.roundErrors], table).toBe(summary?.[table]?.roundErrors);
        expect(m?.[OUTBOX_METRICS.published], table).toBe(0);
        expect(m, table).not.toHaveProperty(OUTBOX_METRICS.backlog); // its query failed
      }
    } finally {
      await broken.close();
    }
  });

  it('rounds throw at a fault point: round errors counted per outbox beside the backlog', async () => {
    const orders = new OrderService({ db: t.db });
    for (let i = 0; i < 3; i++)
      await orders.place({ sku: 'sku-1', quantity: 1, correlationId: `h${i}` });
    const scope = new FaultScope();
    scope.arm('relay.after-publish', 1_000); // every round with rows throws before marking
    const handler = relayHandler(t.db);
    let summary: Awaited<ReturnType<typeof handler>> | undefined;
    const { byOutbox } = await captureEmf(() =>
      scope.run(async () => {
        summary = await handler(scheduledEvent, localLambdaContext('outbox-relay', 1_500));
      }),
    );
    expect(summary?.outbox?.roundErrors).toBeGreaterThanOrEqual(1);
    expect(summary?.outbox?.published).toBe(0);
    expect(byOutbox.get('outbox')).toMatchObject({
      [OUTBOX_METRICS.heartbeat]: 1,
      [OUTBOX_METRICS.roundErrors]: summary?.outbox?.roundErrors,
      [OUTBOX_METRICS.backlog]: 3,
    });
    // inventory_outbox had nothing to claim: its rounds went fine
    expect(byOutbox.get('inventory_outbox')).toMatchObject({
      [OUTBOX_METRICS.heartbeat]: 1,
      [OUTBOX_METRICS.roundErrors]: 0,
    });
  });
});

describe('npm run bench (short run)', () => {
  it('writes well-formed figures with a baseline and a ratio', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'bench-'));
    const out = join(dir, 'bench.json');
    await promisify(execFile)(
      process.execPath,
      [
        '--import',
        'tsx',
        'bench/run.ts',
        'relay',
        '--messages',
        '300',
        '--runs',
        '1',
        '--out',
        out,
      ],
      {
        env: {
          ...process.env,
          DATABASE_URL,
          RABBITMQ_MANAGEMENT_URL,
          SQS_ENDPOINT: SQS_SERVERS[0]?.endpoint,
        },
      },
    );
    const report = JSON.parse(await readFile(out, 'utf8'));
    for (const name of ['relay.rabbitmq', 'relay.sqs']) {
      const figure = report[name];
      expect(figure).toMatchObject({ unit: 'events/s', messages: 300 });
      for (const key of ['value', 'baseline', 'ratio']) {
        expect(typeof figure[key]).toBe('number');
        expect(figure[key]).toBeGreaterThan(0);
      }
      expect(figure.ratio).toBeCloseTo(figure.value / figure.baseline, 1);
    }
  });

  it('end to end, memory, cost at scale and bundles: well-formed figures and a summary', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'bench-'));
    const out = join(dir, 'bench.json');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '--import',
        'tsx',
        'bench/run.ts',
        '--suite',
        'e2e,memory,scale,bundle',
        ...['--rate', '40', '--duration', '1', '--warmup', '0', '--raw-duration', '1'],
        ...['--max-duration', '1', '--search', '40,40,40,1', '--skus', '5'],
        ...['--scale-rows', '2000', '--scale-samples', '2', '--batch-size', '50'],
        ...['--out', out],
      ],
      { env: { ...process.env, DATABASE_URL, RABBITMQ_MANAGEMENT_URL } },
    );
    const report = JSON.parse(await readFile(out, 'utf8'));
    const names = [
      ...['rabbitmq', 'sqs'].flatMap((t) => [
        `e2e.${t}`,
        `e2e.${t}.p50`,
        `e2e.${t}.p99`,
        `e2e.${t}.lag.p50`,
        `e2e.${t}.lag.p99`,
        `e2e.${t}.sustainable`,
        `memory.${t}.relay`,
        `memory.${t}.consumer`,
      ]),
      'scale.relay',
      'scale.reserve',
      'bundle.place-order',
      'bundle.outbox-relay',
      'bundle.reserve-inventory-rabbitmq',
      'bundle.reserve-inventory-sqs',
    ];
    for (const name of names) {
      const figure = report[name];
      expect(figure, name).toBeDefined();
      expect(typeof figure.unit).toBe('string');
      for (const key of ['value', 'baseline', 'ratio']) {
        expect(Number.isFinite(figure[key]), `${name}.${key}`).toBe(true);
      }
      expect(figure.baseline, name).toBeGreaterThan(0);
      if (!name.endsWith('.sustainable')) expect(figure.value, name).toBeGreaterThan(0);
      expect(figure.ratio).toBeCloseTo(figure.value / figure.baseline, 1);
    }
    expect(report['e2e.rabbitmq.p99'].goal).toEqual({ on: 'value', max: 500 });
    expect(report['e2e.rabbitmq'].reserved).toBe(report['e2e.rabbitmq'].orders);
    expect(report['scale.relay']).toMatchObject({ unit: 'ms', rows: 2000 });
    const summary = await readFile(join(dir, 'bench.md'), 'utf8');
    for (const name of names) {
      expect(summary).toContain(`| ${name} |`);
      expect(stdout).toContain(name);
    }
  }, 120_000);
});

describe('the relay as deployed: kicked after COMMIT, ticked by the schedule', () => {
  let t: TestDatabase;
  const backend = memoryBackend({ topology: PIPELINE_TOPOLOGY });
  beforeAll(async () => {
    t = await createTestDatabase('relay_kicked');
    await backend.prepare();
  });
  afterAll(() => t?.drop());

  const deployed = (db: typeof t.db, state: MemoryRelayStateStore) => {
    const logger = createLogger('outbox-relay-test');
    const relays = createRelays({ db, backend }, loadEnv({}));
    return relayLambdaHandler(
      {
        relays,
        logger,
        report: (results, read) =>
          publishOutboxMetrics(read ? db : undefined, relays, results, logger),
      },
      {
        drainBudgetMs: 50_000,
        idleWaitMs: 20,
        safetyMarginMs: 500,
        kicked: { lingerMs: 300, sweep: { quietMs: 600_000, intervalMs: 3_600_000 }, state },
      },
    );
  };
  const kick = { source: KICK_SOURCE, from: 'place-order' } as const;

  it('a kick drains what is there and stops after its linger, long before its budget; it records the run', async () => {
    const orders = new OrderService({ db: t.db });
    for (let i = 0; i < 5; i++)
      await orders.place({ sku: 'sku-1', quantity: 1, correlationId: `k${i}` });
    const state = new MemoryRelayStateStore();
    const started = Date.now();
    const summary = await deployed(t.db, state)(kick, localLambdaContext('outbox-relay', 60_000));
    expect(summary.mode).toBe('kick');
    expect(summary.outbox?.published).toBe(5);
    expect(Date.now() - started).toBeLessThan(50_000);
    expect(state.state).toMatchObject({ pending: false });
    expect(state.state?.lastActivityAt).toBeGreaterThanOrEqual(started);
  });

  it('a tick after a recent run touches no database: the heartbeat still goes out', async () => {
    const broken = await proxiedDatabase(t.url);
    try {
      broken.proxy.cut();
      const now = Date.now();
      const state = new MemoryRelayStateStore();
      state.state = { lastCheckAt: now, lastActivityAt: now, pending: false };
      let summary: Record<string, unknown> | undefined;
      const { byOutbox } = await captureEmf(async () => {
        summary = await deployed(broken.db, state)(
          scheduledEvent,
          localLambdaContext('outbox-relay', 60_000),
        );
      });
      expect(summary).toMatchObject({ mode: 'tick', outbox: { rounds: 0, roundErrors: 0 } });
      expect(byOutbox.get('outbox')?.[OUTBOX_METRICS.heartbeat]).toBe(1);
      expect(byOutbox.get('outbox')).not.toHaveProperty(OUTBOX_METRICS.backlog);
      expect(state.state?.lastCheckAt).toBe(now); // nothing recorded: nothing was read
    } finally {
      await broken.close();
    }
  });

  it("an operator's drain event reads both outboxes when a tick would not (a recent run, nothing left): it publishes and records the look; an empty event is a tick", async () => {
    const orders = new OrderService({ db: t.db });
    const placed = await orders.place({ sku: 'sku-1', quantity: 1, correlationId: 'drain' });
    const now = Date.now();
    const recent = { lastCheckAt: now, lastActivityAt: now, pending: false };
    const context = () => localLambdaContext('outbox-relay', 60_000);

    const state = new MemoryRelayStateStore();
    state.state = { ...recent };
    expect(await deployed(t.db, state)({} as never, context())).toMatchObject({
      mode: 'tick',
      outbox: { rounds: 0 },
    });
    const started = Date.now();
    const summary = await deployed(t.db, state)({ source: DRAIN_SOURCE, from: 'cli' }, context());
    expect(summary).toMatchObject({
      mode: 'drain',
      outbox: { published: 1 },
      inventory_outbox: { roundErrors: 0 },
    });
    expect(summary.inventory_outbox?.rounds).toBeGreaterThan(0);
    // it stopped after its linger, not at the end of its 50 s budget
    expect(Date.now() - started).toBeLessThan(50_000);
    expect(state.state).toMatchObject({ pending: false });
    expect(state.state?.lastCheckAt).toBeGreaterThanOrEqual(started);
    const { rows } = await t.db.query('SELECT published_at FROM outbox WHERE id = $1', [
      placed.eventId,
    ]);
    expect(rows[0]?.published_at).not.toBeNull();
  });

  it('a tick sweeps when the last run left rows (the database was down): it publishes them and records none left', async () => {
    const orders = new OrderService({ db: t.db });
    const placed = await orders.place({ sku: 'sku-1', quantity: 1, correlationId: 'left' });
    const state = new MemoryRelayStateStore();
    state.state = { lastCheckAt: Date.now(), lastActivityAt: Date.now(), pending: true };
    const summary = await deployed(t.db, state)(
      scheduledEvent,
      localLambdaContext('outbox-relay', 60_000),
    );
    expect(summary).toMatchObject({ mode: 'sweep', outbox: { published: 1 } });
    expect(state.state?.pending).toBe(false);
    const { rows } = await t.db.query('SELECT published_at FROM outbox WHERE id = $1', [
      placed.eventId,
    ]);
    expect(rows[0]?.published_at).not.toBeNull();
  });

  it('a kicked run that cannot declare its topology (broker down) fails, and records rows as possibly left', async () => {
    const state = new MemoryRelayStateStore();
    const now = Date.now();
    state.state = { lastCheckAt: now, lastActivityAt: now, pending: false };
    const logger = createLogger('outbox-relay-test');
    const handler = relayLambdaHandler(
      {
        relays: createRelays({ db: t.db, backend }, loadEnv({})),
        logger,
        prepare: async () => {
          throw new Error('broker unreachable');
        },
      },
      {
        drainBudgetMs: 50_000,
        idleWaitMs: 20,
        safetyMarginMs: 500,
        kicked: { lingerMs: 300, sweep: { quietMs: 600_000, intervalMs: 3_600_000 }, state },
      },
    );
    await expect(handler(kick, localLambdaContext('outbox-relay', 60_000))).rejects.toThrow(
      'broker unreachable',
    );
    expect(state.state?.pending).toBe(true);
  });

  it('a kicked run that cannot reach the database records rows as possibly left, so the next tick sweeps', async () => {
    const broken = await proxiedDatabase(t.url);
    try {
      broken.proxy.cut();
      const state = new MemoryRelayStateStore();
      const summary = await deployed(broken.db, state)(
        kick,
        localLambdaContext('outbox-relay', 60_000),
      );
      expect(summary.outbox?.roundErrors).toBeGreaterThanOrEqual(1);
      expect(state.state?.pending).toBe(true);
    } finally {
      await broken.close();
    }
  });
});
