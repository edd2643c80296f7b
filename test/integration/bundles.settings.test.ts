import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSqsEventSource } from '../../devkit/lambda/eventSources.js';
import { waitFor } from '../../devkit/waitFor.js';
import { DEFAULT_RETENTION, DEFAULT_RETRY_BUDGET, newEnvelope } from '../../shared/index.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { sqsBackend } from '../../shared/transport/sqs/SqsBackend.js';
import { type BundleRig, bundleRig } from '../helpers/bundles.js';

/**
 * One source for trigger settings: the SQS event source emulation takes its batch size and
 * maximum concurrency from the synthesized template, so a deployment synthesized with other
 * values (`cdk synth -c pipeline=…`) behaves differently here, with nothing else changed.
 */
const ORDERS = 9;
const OVERRIDE = { sqs: { batchSize: 2, maxConcurrency: 2 } };

describe('trigger settings come from the synthesized template', () => {
  const rigs: BundleRig[] = [];

  /** The deployment deployed, ORDERS order events in its source queue, its consumer started. */
  async function consume(f: BundleRig) {
    await f.pipeline.deploy();
    await f.inventoryDb.query("INSERT INTO stock (sku, available) VALUES ('SKU-S', 100)");
    const queues = {
      source: f.deployment.queue('inventory-orders').url,
      parking: f.deployment.queue('inventory-orders-parking').url,
    };
    const backend = sqsBackend({
      endpoint: f.deployment.sqsEndpoint,
      region: 'us-east-1',
      mode: 'visibility',
      budget: DEFAULT_RETRY_BUDGET,
      retention: DEFAULT_RETENTION,
      topology: PIPELINE_TOPOLOGY,
      consumer: 'settings-test',
      queueUrls: queues,
    });
    const envelopes = Array.from({ length: ORDERS }, () => {
      const orderId = randomUUID();
      return newEnvelope({
        type: 'order.created',
        aggregate: { type: 'order', id: orderId, version: 1 },
        data: { orderId, sku: 'SKU-S', quantity: 1 },
        correlationId: 'settings-test',
        producer: 'order-service',
      });
    });
    expect((await backend.publisher('outbox').publish(envelopes)).every((o) => o.ok)).toBe(true);
    await backend.close();
    const source = await startSqsEventSource(f.deployment, 'reserve-inventory-sqs');
    try {
      await waitFor(() => f.journal.lines.filter((l) => l.step === 'acked').length >= ORDERS, {
        timeoutMs: 40_000,
        message: `${ORDERS} messages acknowledged`,
      });
    } finally {
      await source.stop();
    }
    return {
      settings: source.settings,
      largestBatch: source.stats.largestBatch ?? 0,
      batches: source.stats.batches ?? 0,
      peakConcurrency: f.deployment.fn('reserve-inventory-sqs').stats.peakConcurrency,
    };
  }

  let deployed: Awaited<ReturnType<typeof consume>>;
  let overridden: Awaited<ReturnType<typeof consume>>;

  beforeAll(async () => {
    const [a, b] = await Promise.all([
      bundleRig('sqs', 'bundles_settings_default'),
      bundleRig('sqs', 'bundles_settings_override', {
        context: { pipeline: JSON.stringify(OVERRIDE) },
      }),
    ]);
    rigs.push(a, b);
    deployed = await consume(a);
    overridden = await consume(b);
  }, 400_000);

  afterAll(async () => {
    await Promise.all(rigs.map((f) => f.close()));
  }, 60_000);

  it('reads the mapping as synthesized: batch size 10 and 5 at once by default, 2 and 2 with the override', () => {
    expect(deployed.settings).toMatchObject({ batchSize: 10, maxConcurrency: 5 });
    expect(overridden.settings).toMatchObject({ batchSize: 2, maxConcurrency: 2 });
  });

  it('delivers the queued orders in larger batches as deployed, in batches of at most 2 with the override', () => {
    expect(deployed.largestBatch).toBeGreaterThan(2);
    expect(overridden.largestBatch).toBeLessThanOrEqual(2);
    expect(overridden.batches).toBeGreaterThanOrEqual(Math.ceil(ORDERS / 2));
  });

  it('never runs more invocations at once than the mapping allows', () => {
    expect(overridden.peakConcurrency).toBeLessThanOrEqual(2);
    expect(deployed.peakConcurrency).toBeLessThanOrEqual(5);
  });
});
