import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ScheduledEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createScratch, type ScratchEnvironment } from '../../devkit/scratch.js';
import { localLambdaContext } from '../../devkit/triggers/lambdaContext.js';
import { createOutboxRelayHandler } from '../../functions/outbox-relay/handler.js';
import { DEFAULT_RETENTION, TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { loadEnv } from '../../shared/config/env.js';
import { createLogger } from '../../shared/logger.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { publishOutboxMetrics } from '../../shared/outbox/metrics.js';
import { createRelays } from '../../shared/outbox/relays.js';
import { memoryBackend } from '../../shared/transport/memory/index.js';
import type { RabbitMqBackend } from '../../shared/transport/rabbitmq/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
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
    const handler = createOutboxRelayHandler(
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
    const relays = createRelays({ db: t.db, backend: memoryBackend() }, loadEnv({}));
    const lines: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      await publishOutboxMetrics(t.db, relays, [
        { published: 7, failed: 1 },
        { published: 0, failed: 0 },
      ]);
    } finally {
      spy.mockRestore();
    }
    const emf = lines
      .flatMap((l) => l.split('\n'))
      .filter((l) => l.includes('"_aws"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const outbox = emf.find((m) => m.Outbox === 'outbox');
    expect(outbox).toMatchObject({
      OutboxBacklog: 2,
      OutboxNeedsAttention: 1,
      OutboxPublished: 7,
      OutboxPublishFailures: 1,
    });
    expect(outbox?.OutboxOldestUnpublishedAgeSeconds).toBeGreaterThanOrEqual(89);
    expect(emf.find((m) => m.Outbox === 'inventory_outbox')).toMatchObject({ OutboxBacklog: 0 });
    const aws = outbox?._aws as { CloudWatchMetrics: { Namespace: string }[] } | undefined;
    expect(aws?.CloudWatchMetrics[0]?.Namespace).toBe('ReliableMessaging');
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
