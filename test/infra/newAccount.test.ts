import { readFileSync } from 'node:fs';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { BROKER_PRESETS, pipelineConfig } from '../../infra/config.js';
import { addPipeline, brokerSettingsFromContext } from '../../infra/pipelineApp.js';
import { synthPipelines } from '../helpers/templates.js';

/**
 * What `cdk deploy` creates deploys on a new account (an engine version Aurora still offers, no
 * concurrency reserved out of a small quota) and keeps what it should (backups, messages), read
 * from the synthesized templates: the defaults, and the production choices one context value away.
 */
const config = pipelineConfig();
const facts = readFileSync('docs/aws-facts.md', 'utf8');

type Resource = { Type: string; Properties: Record<string, unknown> };
const resources = (t: Template, type: string) => Object.values(t.findResources(type)) as Resource[];
/** Our functions by their Powertools service name (the CDK Provider framework's have none). */
const functionsOf = (t: Template) =>
  new Map(
    resources(t, 'AWS::Lambda::Function').flatMap((f) => {
      const env = (f.Properties.Environment as { Variables?: Record<string, unknown> } | undefined)
        ?.Variables;
      const name = env?.POWERTOOLS_SERVICE_NAME;
      return typeof name === 'string' ? [[name, f.Properties] as const] : [];
    }),
  );

/** The app as `cdk synth -c transport=rabbitmq -c broker=… -c pipeline='…'` builds it. */
function synthApp(context: Record<string, string>) {
  const app = new App({
    context: { transport: 'rabbitmq', nag: 'off', 'aws:cdk:bundling-stacks': [], ...context },
  });
  addPipeline(app);
  const stack = (id: string) => app.node.findChild(id) as import('aws-cdk-lib').Stack;
  return {
    data: Template.fromStack(stack('ReliableMessagingData')),
    rabbit: Template.fromStack(stack('ReliableMessagingRabbitMq')),
  };
}

let t: ReturnType<typeof synthPipelines>;
let production: ReturnType<typeof synthApp>;
beforeAll(() => {
  t = synthPipelines();
  production = synthApp({
    broker: 'production',
    pipeline: JSON.stringify({
      relay: { reservedConcurrency: 2 },
      httpApi: {
        placeOrderReservedConcurrency: 20,
        throttlingRateLimit: 500,
        throttlingBurstLimit: 1000,
      },
    }),
  });
}, 120_000);

describe('CDK: Aurora on a version it keeps offering, with backups', () => {
  it('the engine is the LTS minor docs/aws-facts.md names for its major, and stays on it', () => {
    // the row names the LTS minor and where AWS says so
    const row = facts
      .split('\n')
      .find((l) => /Aurora PostgreSQL \d+'s long-term-support \(LTS\) minor is \*\*/.test(l));
    expect(row, 'docs/aws-facts.md: the Aurora PostgreSQL LTS row').toBeDefined();
    const [, major, lts] =
      /Aurora PostgreSQL (\d+)'s long-term-support \(LTS\) minor is \*\*(\d+\.\d+)\*\*/.exec(
        row ?? '',
      ) as unknown as [string, string, string];
    expect(row).toMatch(/Release calendars for Aurora PostgreSQL/);
    const [cluster] = resources(t.data, 'AWS::RDS::DBCluster');
    expect(cluster?.Properties).toMatchObject({ Engine: 'aurora-postgresql', EngineVersion: lts });
    expect(lts.split('.')[0]).toBe(major);
    // AWS: an LTS minor is kept only with automatic minor version upgrades off on every instance
    const instances = resources(t.data, 'AWS::RDS::DBInstance');
    expect(instances.length).toBeGreaterThan(0);
    for (const i of instances) expect(i.Properties.AutoMinorVersionUpgrade).toBe(false);
  });

  it('automated backups are kept 14 days (Aurora’s default is 1)', () => {
    const [cluster] = resources(t.data, 'AWS::RDS::DBCluster');
    expect(cluster?.Properties.BackupRetentionPeriod).toBe(14);
  });
});

describe('CDK: no concurrency reserved out of a new account’s quota, unless asked', () => {
  it('by default neither the relay nor place-order reserves any (both stacks)', () => {
    for (const [name, template] of [
      ['sqs', t.sqs],
      ['rabbitmq', t.rabbit],
    ] as const) {
      const reserved = resources(template, 'AWS::Lambda::Function').filter(
        (f) => 'ReservedConcurrentExecutions' in f.Properties,
      );
      expect(reserved, name).toEqual([]);
    }
  });

  it('-c pipeline=\'{"relay":{"reservedConcurrency":2},…}\' reserves 2 for the relay, place-order its own', () => {
    const fns = functionsOf(production.rabbit);
    expect(fns.get('outbox-relay')?.ReservedConcurrentExecutions).toBe(2);
    expect(fns.get('place-order')?.ReservedConcurrentExecutions).toBe(20);
    for (const [name, p] of fns) {
      if (name !== 'outbox-relay' && name !== 'place-order') {
        expect(p, name).not.toHaveProperty('ReservedConcurrentExecutions');
      }
    }
  });
});

describe('CDK: the HTTP API throttles by default', () => {
  it('the $default stage’s default route: 50 requests/s, burst 100; overridable', () => {
    for (const template of [t.sqs, t.rabbit]) {
      template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
        StageName: '$default',
        DefaultRouteSettings: {
          ThrottlingRateLimit: config.httpApi.throttlingRateLimit,
          ThrottlingBurstLimit: config.httpApi.throttlingBurstLimit,
        },
      });
    }
    expect(config.httpApi).toMatchObject({ throttlingRateLimit: 50, throttlingBurstLimit: 100 });
    production.rabbit.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      DefaultRouteSettings: { ThrottlingRateLimit: 500, ThrottlingBurstLimit: 1000 },
    });
  });
});

describe('CDK: SQS keeps messages as long as it can, and parking outlives what it parks', () => {
  it('inventory-orders and its parking keep 14 days (SQS’s maximum); the results queue 4, its parking 14', () => {
    const retention = (queueName: string) =>
      resources(t.sqs, 'AWS::SQS::Queue').find((q) => q.Properties.QueueName === queueName)
        ?.Properties.MessageRetentionPeriod;
    const days = (n: number) => n * 24 * 3600;
    expect(retention(config.names.inventoryQueue)).toBe(days(14));
    expect(retention(config.names.parkingQueue)).toBe(days(14));
    // every result reaches its parking queue through the redrive policy, its enqueue time kept
    expect(retention(config.names.inventoryResultsQueue)).toBe(days(4));
    expect(retention(`${config.names.inventoryResultsQueue}-parking`)).toBe(days(14));
  });
});

describe('CDK: the broker, a test size by default, production one context value away', () => {
  it('default (-c broker=test): one mq.m7g.medium', () => {
    t.rabbit.hasResourceProperties('AWS::AmazonMQ::Broker', {
      HostInstanceType: 'mq.m7g.medium',
      DeploymentMode: 'SINGLE_INSTANCE',
      EngineVersion: '4.2',
    });
    expect(brokerSettingsFromContext(() => undefined)).toEqual(BROKER_PRESETS.test);
  });

  it('-c broker=production: a three-node cluster of mq.m7g.large across three AZs', () => {
    const [broker] = resources(production.rabbit, 'AWS::AmazonMQ::Broker');
    expect(broker?.Properties).toMatchObject({
      HostInstanceType: 'mq.m7g.large',
      DeploymentMode: 'CLUSTER_MULTI_AZ',
      EngineVersion: '4.2',
    });
    expect(broker?.Properties.SubnetIds).toHaveLength(3);
  });

  it('single settings apply on top of a preset; an unknown preset is refused', () => {
    const context = (values: Record<string, string>) => (key: string) => values[key];
    expect(
      brokerSettingsFromContext(context({ broker: 'production', brokerInstance: 'mq.m7g.xlarge' })),
    ).toEqual({ engineVersion: '4.2', instanceType: 'mq.m7g.xlarge', deployment: 'cluster' });
    expect(() => brokerSettingsFromContext(context({ broker: 'prod' }))).toThrow(
      /-c broker=prod: expected test or production/,
    );
    expect(() => brokerSettingsFromContext(context({ brokerDeployment: 'multi' }))).toThrow(
      /brokerDeployment=multi/,
    );
  });

  it('docs/aws-facts.md states both instance types’ connection and channel limits', () => {
    for (const preset of Object.values(BROKER_PRESETS)) {
      expect(facts, preset.instanceType).toMatch(
        new RegExp(`${preset.instanceType.replace(/\./g, '\\.')}[^|]*connections`),
      );
    }
  });
});

describe('CDK: Lambda recursive loop detection, decided per function of the relay’s chain', () => {
  it('SQS: the relay, reserve and order-results allow the loop (relay → SQS → reserve → kick → relay); nothing else changes the default', () => {
    const fns = functionsOf(t.sqs);
    for (const [name, p] of fns) {
      const inChain = ['outbox-relay', 'reserve-inventory-sqs', 'order-results-sqs'].includes(name);
      expect(p.RecursiveLoop, name).toBe(inChain ? 'Allow' : undefined);
    }
  });

  it('RabbitMQ: no loop Lambda follows (AMQP): the same functions keep it terminated, explicitly', () => {
    const fns = functionsOf(t.rabbit);
    for (const [name, p] of fns) {
      const inChain = [
        'outbox-relay',
        'reserve-inventory-rabbitmq',
        'order-results-rabbitmq',
      ].includes(name);
      expect(p.RecursiveLoop, name).toBe(inChain ? 'Terminate' : undefined);
    }
  });
});
