import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Match, type Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { pipelineConfig } from '../../infra/config.js';
import { renderDeployedNumbers } from '../../lab/deployedNumbers.js';
import { REAL_TIME_SETTINGS, SCALED_SETTINGS } from '../../lab/settings.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { declaredTopology } from '../../shared/transport/rabbitmq/index.js';
import { synthPipelines } from '../helpers/templates.js';

/**
 * The numbers the docs and `npm start -- --real-time` use are the ones the stacks deploy: the
 * lab's real-time settings against the synthesized templates, and docs/deployed-numbers.md
 * against its generator.
 */
const config = pipelineConfig();

/** A function's properties by its Powertools service name. */
function fn(template: Template, service: string) {
  const found = Object.values(
    template.findResources('AWS::Lambda::Function', {
      Properties: {
        Environment: { Variables: Match.objectLike({ POWERTOOLS_SERVICE_NAME: service }) },
      },
    }),
  );
  expect(found, service).toHaveLength(1);
  return found[0]?.Properties as {
    Timeout: number;
    Environment: { Variables: Record<string, unknown> };
  };
}

describe('deployed numbers', () => {
  let t: ReturnType<typeof synthPipelines>;
  beforeAll(() => {
    t = synthPipelines();
  });

  it("npm start -- --real-time runs at the SQS stack's timings", () => {
    const real = REAL_TIME_SETTINGS;
    const reserve = fn(t.sqs, 'reserve-inventory-sqs');
    expect(reserve.Timeout * 1000).toBe(real.functionTimeoutMs);
    expect(reserve.Environment.Variables.RETRY_LADDER_MS).toBe(real.budget.ladderMs.join(','));
    expect(reserve.Environment.Variables.RETRY_MAX_ATTEMPTS).toBe(String(real.budget.maxAttempts));
    expect(reserve.Environment.Variables.RETRY_MAX_AGE_MS).toBe(String(real.budget.maxAgeMs));
    t.sqs.hasResourceProperties('AWS::SQS::Queue', {
      QueueName: config.names.inventoryQueue,
      VisibilityTimeout: real.visibilityTimeoutSeconds,
    });
  });

  it("npm start -- --real-time runs at the Amazon MQ stack's timings", () => {
    const real = REAL_TIME_SETTINGS;
    const reserve = fn(t.rabbit, 'reserve-inventory-rabbitmq');
    expect(reserve.Timeout * 1000).toBe(real.functionTimeoutMs);
    expect(reserve.Environment.Variables.RETRY_LADDER_MS).toBe(real.budget.ladderMs.join(','));
    const mappings = Object.values(t.rabbit.findResources('AWS::Lambda::EventSourceMapping'));
    const inventory = mappings.filter((m) =>
      JSON.stringify(m.Properties?.Queues).includes(RABBITMQ_NAMES.inventoryQueue),
    );
    expect(inventory).toHaveLength(1);
    const windowS = inventory[0]?.Properties?.MaximumBatchingWindowInSeconds as number | undefined;
    // unset: Lambda's default of 500 ms
    expect(windowS === undefined ? 500 : windowS * 1000).toBe(real.mqBatchWindowMs);
    // the delivery limit the deployed policy sets (broker-setup applies declaredTopology)
    const inventoryPolicy = declaredTopology(
      PIPELINE_TOPOLOGY,
      config.budget,
      config.retention,
    ).policies.find((p) => p.name === RABBITMQ_NAMES.inventoryQueue);
    expect(inventoryPolicy?.definition['delivery-limit']).toBe(real.deliveryLimit);
  });

  it('docs/deployed-numbers.md is what `npm run docs:numbers` writes', () => {
    const committed = readFileSync(
      join(import.meta.dirname, '..', '..', 'docs', 'deployed-numbers.md'),
      'utf8',
    );
    const generated = renderDeployedNumbers(config, {
      scaled: SCALED_SETTINGS,
      realTime: REAL_TIME_SETTINGS,
    });
    // the committed file is formatted by Biome: compare the words, not the padding
    const words = (s: string) => s.replace(/[\s|-]+/g, ' ').trim();
    expect(words(committed)).toBe(words(generated));
  });

  it("the stated SQS mapping cap and Aurora capacity are the templates'", () => {
    const mappings = Object.values(t.sqs.findResources('AWS::Lambda::EventSourceMapping'));
    for (const m of mappings) {
      expect(m.Properties?.ScalingConfig).toEqual({
        MaximumConcurrency: config.sqs.maxConcurrency,
      });
    }
    t.data.hasResourceProperties('AWS::RDS::DBCluster', {
      ServerlessV2ScalingConfiguration: { MinCapacity: 0, MaxCapacity: 4 },
    });
  });
});
