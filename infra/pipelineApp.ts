import { type App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import {
  BROKER_PRESETS,
  type BrokerPreset,
  type BrokerSettings,
  pipelineConfigFromContext,
} from './config.js';
import { dataApiAccess } from './constructs/index.js';
import { DataStack, DEFAULT_DATABASE_NAME, inventoryDatabaseNameOf } from './stacks/DataStack.js';
import { RabbitPipelineStack } from './stacks/RabbitPipelineStack.js';
import { SqsPipelineStack } from './stacks/SqsPipelineStack.js';

/**
 * The stacks of the CDK app, from its context: `-c transport=sqs|rabbitmq`. The data stack holds
 * Aurora Serverless v2 with the Data API; the pipeline stack the broker or queues and the
 * functions. Settings come from infra/config.ts, derived from the runtime's own config module;
 * `-c pipeline='{"sqs":{"batchSize":3}}'` overrides single ones (`PipelineOverrides`). A function
 * of its own so that tooling can build the same app in-process (devkit/lambda/synth.ts).
 */
export function addPipeline(app: App): void {
  const config = pipelineConfigFromContext(app.node.tryGetContext('pipeline'));
  const transport = app.node.tryGetContext('transport') ?? 'sqs';
  if (transport !== 'sqs' && transport !== 'rabbitmq') {
    throw new Error(`-c transport=${transport}: expected "sqs" or "rabbitmq"`);
  }
  if (app.node.tryGetContext('emulator') === 'moto') {
    // moto runs CloudFormation for queues, functions, event source mappings and rules, but has no
    // Aurora, CloudWatch alarms or API Gateway v2: deploy the SQS pipeline alone with stand-in ARNs.
    new SqsPipelineStack(app, 'ReliableMessagingSqs', {
      config,
      database: {
        clusterArn: 'arn:aws:rds:us-east-1:123456789012:cluster:emulated',
        secretArns: {
          orders: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:emulated-orders',
          inventory: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:emulated-inventory',
          relay: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:emulated-relay',
          maintenance: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:emulated-maintenance',
        },
        databaseName: DEFAULT_DATABASE_NAME,
        grant: () => {},
      },
      inventoryDatabaseName: inventoryDatabaseNameOf(DEFAULT_DATABASE_NAME),
      alarms: false,
      httpApi: false,
    });
    return;
  }
  const minCapacity = Number(app.node.tryGetContext('minCapacity') ?? 0);
  const data = new DataStack(app, 'ReliableMessagingData', {
    minCapacity,
    deletionProtection: app.node.tryGetContext('deletionProtection') !== 'false',
  });
  // the order service's database is the cluster's default; the inventory service's is beside it
  const database = dataApiAccess(data.cluster, data.databaseName, data.dbSecrets);
  const { inventoryDatabaseName } = data;
  if (transport === 'sqs') {
    new SqsPipelineStack(app, 'ReliableMessagingSqs', { config, database, inventoryDatabaseName });
  } else {
    new RabbitPipelineStack(app, 'ReliableMessagingRabbitMq', {
      config,
      database,
      inventoryDatabaseName,
      broker: brokerSettingsFromContext((key) => app.node.tryGetContext(key)),
    });
  }
  if (app.node.tryGetContext('nag') !== 'off')
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
}

/**
 * The broker from the context: `-c broker=test|production` (unset: test, `DEFAULT_BROKER`), then
 * single settings on top (`-c brokerEngine=3.13 -c brokerInstance=mq.m7g.xlarge
 * -c brokerDeployment=cluster`).
 */
export function brokerSettingsFromContext(context: (key: string) => unknown): BrokerSettings {
  const preset = context('broker') ?? 'test';
  if (typeof preset !== 'string' || !Object.hasOwn(BROKER_PRESETS, preset)) {
    throw new Error(
      `-c broker=${String(preset)}: expected ${Object.keys(BROKER_PRESETS).join(' or ')}`,
    );
  }
  const base: BrokerSettings = BROKER_PRESETS[preset as BrokerPreset];
  const deployment = context('brokerDeployment') ?? base.deployment;
  if (deployment !== 'single' && deployment !== 'cluster') {
    throw new Error(`-c brokerDeployment=${String(deployment)}: expected "single" or "cluster"`);
  }
  return {
    engineVersion: String(context('brokerEngine') ?? base.engineVersion),
    instanceType: String(context('brokerInstance') ?? base.instanceType),
    deployment,
  };
}
