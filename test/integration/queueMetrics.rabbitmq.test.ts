import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratch, type ScratchEnvironment } from '../../devkit/scratch.js';
import { TcpProxy } from '../../devkit/TcpProxy.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { DEFAULT_RETENTION } from '../../shared/index.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import type { RabbitMqBackend } from '../../shared/transport/rabbitmq/index.js';
import { QUEUE_METRICS } from '../../shared/transport/rabbitmq/index.js';
import { reportQueueMetrics } from '../../shared/transport/rabbitmq/queueMetrics.js';
import { captureEmf } from '../helpers/emf.js';
import { amqpUrlVia } from '../helpers/rabbit.js';
import { AMQP_URL, RABBITMQ_MANAGEMENT_URL, SERVICES } from '../helpers/services.js';

/** The EMF document of `QueueMetricsAvailable` (no `Queue` dimension), and those of the depths. */
const availability = (docs: Record<string, unknown>[]) =>
  docs.filter((d) => QUEUE_METRICS.available in d);
const depths = (docs: Record<string, unknown>[]) => docs.filter((d) => QUEUE_METRICS.depth in d);

describe('QueueMetricsAvailable (RabbitMQ, the relay’s report)', () => {
  let scratch: ScratchEnvironment;
  let backend: RabbitMqBackend;
  const vhost = () => scratch.vhost?.vhost as string;
  const backendFor = (overrides: Record<string, unknown> = {}) =>
    scratch.backend(
      'rabbitmq',
      {
        budget: TEST_RETRY_BUDGET,
        retention: DEFAULT_RETENTION,
        consumer: 'queue-metrics-test',
        topology: PIPELINE_TOPOLOGY,
      },
      {
        reconnect: { baseMs: 50, maxMs: 200 },
        publish: { confirmTimeoutMs: 2_000, connectTimeoutMs: 500 },
        ...overrides,
      },
    ) as RabbitMqBackend;

  beforeAll(async () => {
    scratch = await createScratch(SERVICES, 'queue_metrics');
    backend = backendFor();
    await backend.prepare('consume');
  });
  afterAll(() => scratch?.close());

  it('the broker answers: 1, besides the depths', async () => {
    const { result, docs } = await captureEmf(() => reportQueueMetrics(() => backend.inspect()));
    expect(result).toBe(true);
    expect(availability(docs)).toEqual([
      expect.objectContaining({ [QUEUE_METRICS.available]: 1, service: 'outbox-relay' }),
    ]);
    expect(availability(docs)[0]).not.toHaveProperty('Queue');
    expect(depths(docs).map((d) => d.Queue)).toContain(RABBITMQ_NAMES.inventoryQueue);
    const aws = availability(docs)[0]?._aws as {
      CloudWatchMetrics: { Namespace: string; Dimensions: string[][] }[];
    };
    expect(aws.CloudWatchMetrics[0]).toMatchObject({
      Namespace: 'ReliableMessaging',
      Dimensions: [['service']],
    });
  });

  it('the broker is unreachable: 0, no depths, and the report does not throw', async () => {
    const port = Number(new URL(AMQP_URL).port || 5672);
    const proxy = await new TcpProxy('127.0.0.1', port).start();
    proxy.cut();
    const unreachable = backendFor({ url: amqpUrlVia(proxy.port, vhost()) });
    try {
      const { result, docs } = await captureEmf(() =>
        reportQueueMetrics(() => unreachable.inspect()),
      );
      expect(result).toBe(false);
      expect(availability(docs)).toEqual([
        expect.objectContaining({ [QUEUE_METRICS.available]: 0 }),
      ]);
      expect(depths(docs)).toEqual([]);
      expect(proxy.refused).toBeGreaterThan(0);
    } finally {
      await unreachable.close();
      await proxy.close();
    }
  });

  it('only the management API is unreachable: the depths go out, the routes cannot be looked at: 0', async () => {
    const management = new URL(RABBITMQ_MANAGEMENT_URL);
    const proxy = await new TcpProxy('127.0.0.1', Number(management.port || 80)).start();
    proxy.cut();
    management.host = `127.0.0.1:${proxy.port}`;
    const blind = backendFor({ managementUrl: management.toString().replace(/\/$/, '') });
    try {
      const { result, docs } = await captureEmf(() => reportQueueMetrics(() => blind.inspect()));
      expect(result).toBe(false);
      expect(availability(docs)).toEqual([
        expect.objectContaining({ [QUEUE_METRICS.available]: 0 }),
      ]);
      expect(depths(docs).map((d) => d.Queue)).toContain(RABBITMQ_NAMES.inventoryQueue);
      expect(docs.some((d) => QUEUE_METRICS.routeMissing in d)).toBe(false);
    } finally {
      await blind.close();
      await proxy.close();
    }
  });
});
