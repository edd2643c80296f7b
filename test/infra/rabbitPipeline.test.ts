import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  type BrokerSettings,
  DEFAULT_BROKER,
  mqBatchingWindowSeconds,
  pipelineConfig,
} from '../../infra/config.js';
import { dataApiAccess, functionEnvironment } from '../../infra/constructs/index.js';
import { DataStack } from '../../infra/stacks/DataStack.js';
import { RabbitPipelineStack } from '../../infra/stacks/RabbitPipelineStack.js';
import { RABBITMQ_NAMES, RETRY_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { AMAZON_MQ_TRIGGER, declaredTopology } from '../../shared/transport/rabbitmq/index.js';

const config = pipelineConfig();

function synth(broker?: Partial<BrokerSettings>) {
  // no bundling in tests (esbuild runs on `cdk synth`): the templates are what we assert
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const data = new DataStack(app, 'Data');
  const pipeline = new RabbitPipelineStack(app, 'Rabbit', {
    config,
    database: dataApiAccess(data.cluster, data.databaseName, data.dbSecrets),
    inventoryDatabaseName: data.inventoryDatabaseName,
    broker,
  });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return { app, rabbit: Template.fromStack(pipeline) };
}

describe('CDK: Amazon MQ (RabbitMQ) pipeline stack', () => {
  let t: ReturnType<typeof synth>;
  beforeAll(() => {
    t = synth();
  });

  it('a private single-instance RabbitMQ broker by default, credentials from Secrets Manager', () => {
    t.rabbit.hasResourceProperties('AWS::AmazonMQ::Broker', {
      EngineType: 'RABBITMQ',
      EngineVersion: DEFAULT_BROKER.engineVersion,
      HostInstanceType: DEFAULT_BROKER.instanceType,
      DeploymentMode: 'SINGLE_INSTANCE',
      PubliclyAccessible: false,
      AutoMinorVersionUpgrade: true,
      SubnetIds: [Match.anyValue()],
      Logs: { General: true },
      Users: [
        {
          Username: Match.objectLike({
            'Fn::Join': Match.arrayWith([Match.arrayWith(['{{resolve:secretsmanager:'])]),
          }),
          Password: Match.objectLike({
            'Fn::Join': Match.arrayWith([Match.arrayWith([':SecretString:password::}}'])]),
          }),
        },
      ],
    });
    t.rabbit.hasResourceProperties('AWS::SecretsManager::Secret', {
      GenerateSecretString: Match.objectLike({
        GenerateStringKey: 'password',
        SecretStringTemplate: JSON.stringify({ username: 'pipeline' }),
      }),
    });
  });

  it('a cluster by context: three nodes across the private subnets', () => {
    const cluster = synth({ deployment: 'cluster', engineVersion: '3.13' });
    cluster.rabbit.hasResourceProperties('AWS::AmazonMQ::Broker', {
      DeploymentMode: 'CLUSTER_MULTI_AZ',
      EngineVersion: '3.13',
      SubnetIds: [Match.anyValue(), Match.anyValue(), Match.anyValue()],
    });
  });

  it('reserve reads inventory.orders through the Amazon MQ event source with BASIC_AUTH and VIRTUAL_HOST', () => {
    t.rabbit.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      Queues: [RABBITMQ_NAMES.inventoryQueue],
      BatchSize: AMAZON_MQ_TRIGGER.batchSize,
      // 500 ms (Lambda's default) can only be had by leaving the window unset
      MaximumBatchingWindowInSeconds: Match.absent(),
      SourceAccessConfigurations: [
        { Type: 'BASIC_AUTH', URI: { Ref: Match.stringLikeRegexp('BrokerCredentials') } },
        { Type: 'VIRTUAL_HOST', URI: '/' },
      ],
      EventSourceArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^Broker'), 'Arn'] },
    });
    expect(mqBatchingWindowSeconds(2000)).toBe(2);
    expect(() => mqBatchingWindowSeconds(1500)).toThrow(/whole seconds/);
  });

  it('order-results reads orders.inventory-results through its own Amazon MQ event source', () => {
    t.rabbit.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      Queues: [RABBITMQ_NAMES.inventoryResultsQueue],
      FunctionName: { Ref: Match.stringLikeRegexp('^orderresultsrabbitmq') },
      BatchSize: AMAZON_MQ_TRIGGER.batchSize,
      SourceAccessConfigurations: [
        { Type: 'BASIC_AUTH', URI: { Ref: Match.stringLikeRegexp('BrokerCredentials') } },
        { Type: 'VIRTUAL_HOST', URI: '/' },
      ],
      EventSourceArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^Broker'), 'Arn'] },
    });
    t.rabbit.resourceCountIs('AWS::Lambda::EventSourceMapping', 2);
  });

  it('topology and policies are applied on deploy, re-applied when what they declare changes', () => {
    t.rabbit.hasResourceProperties('Custom::BrokerTopology', {
      version: Match.stringLikeRegexp('^[0-9a-f]{16}$'),
      vhost: '/',
    });
    const version = (budgetLadder: number[]) => {
      const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
      const data = new DataStack(app, 'Data');
      const stack = new RabbitPipelineStack(app, 'Rabbit', {
        config: pipelineConfig({ ...config.budget, ladderMs: budgetLadder }),
        database: dataApiAccess(data.cluster, data.databaseName, data.dbSecrets),
        inventoryDatabaseName: data.inventoryDatabaseName,
      });
      const [resource] = Object.values(
        Template.fromStack(stack).findResources('Custom::BrokerTopology'),
      );
      return (resource as { Properties: { version: string } }).Properties.version;
    };
    expect(version([1_000, 5_000])).not.toBe(version([2_000, 5_000]));
    // the policies the custom resource applies carry the delivery limit and the parking route
    expect(
      declaredTopology(PIPELINE_TOPOLOGY, config.budget, config.retention).policies[0]?.definition,
    ).toMatchObject({
      'delivery-limit': 10,
      'dead-letter-exchange': RETRY_NAMES.parkingExchange,
    });
  });

  it('functions that speak AMQP run in the VPC and get the secret ARN, never a secret value', () => {
    const functions = t.rabbit.findResources('AWS::Lambda::Function', {
      Properties: { Runtime: 'nodejs24.x' },
    });
    // ours (the Provider framework adds one of its own)
    const byService = new Map(
      Object.values(functions).flatMap((f) => {
        const p = (
          f as {
            Properties: {
              Environment: { Variables: Record<string, unknown> };
              VpcConfig?: unknown;
              Architectures: string[];
            };
          }
        ).Properties;
        const name = p.Environment.Variables.POWERTOOLS_SERVICE_NAME;
        return typeof name === 'string' ? [[name, p] as const] : [];
      }),
    );
    expect([...byService.keys()].sort()).toEqual([
      'broker-setup',
      'maintenance',
      'order-results-rabbitmq',
      'outbox-relay',
      'place-order',
      'reserve-inventory-rabbitmq',
    ]);
    for (const [name, p] of byService) {
      expect(p.Architectures, name).toEqual(['arm64']);
      const speaksAmqp = name !== 'place-order' && name !== 'maintenance';
      expect(p.VpcConfig !== undefined, name).toBe(speaksAmqp);
      expect('BROKER_SECRET_ARN' in p.Environment.Variables, name).toBe(speaksAmqp);
      expect(p.Environment.Variables, name).toMatchObject({
        ...functionEnvironment({ budget: config.budget }),
        TRANSPORT: 'rabbitmq',
      });
      // every function but broker-setup reaches the database through the Data API
      expect(p.Environment.Variables.DB_DRIVER, name).toBe(
        name === 'broker-setup' ? undefined : 'data-api',
      );
      // a value resolving a secret would be a dynamic reference in the template
      expect(JSON.stringify(p.Environment), name).not.toMatch(/resolve:secretsmanager|password/i);
    }
  });

  it('the broker accepts AMQPS (5671) and the management API (443) from the functions only', () => {
    t.rabbit.hasResourceProperties('AWS::EC2::SecurityGroupIngress', {
      IpProtocol: 'tcp',
      FromPort: 5671,
      ToPort: 5671,
      SourceSecurityGroupId: { 'Fn::GetAtt': [Match.stringLikeRegexp('^FunctionsSg'), 'GroupId'] },
    });
    t.rabbit.hasResourceProperties('AWS::EC2::SecurityGroupIngress', {
      FromPort: 443,
      SourceSecurityGroupId: { 'Fn::GetAtt': [Match.stringLikeRegexp('^FunctionsSg'), 'GroupId'] },
    });
    const open = t.rabbit.findResources('AWS::EC2::SecurityGroup', {
      Properties: {
        SecurityGroupIngress: Match.arrayWith([Match.objectLike({ CidrIp: '0.0.0.0/0' })]),
      },
    });
    expect(Object.keys(open)).toEqual([]);
  });

  it('the event source may describe only this broker', () => {
    t.rabbit.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Action: 'mq:DescribeBroker',
            Resource: { 'Fn::GetAtt': [Match.stringLikeRegexp('^Broker'), 'Arn'] },
          }),
        ]),
      },
    });
  });

  it('alarms: parked messages and consumer backlog from the depths the relay publishes', () => {
    t.rabbit.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'ReliableMessaging',
      MetricName: 'QueueDepth',
      Dimensions: Match.arrayWith([{ Name: 'Queue', Value: RETRY_NAMES.parkingQueue }]),
      Threshold: 0,
      AlarmActions: [Match.anyValue()],
    });
    t.rabbit.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'QueueReady',
      Dimensions: Match.arrayWith([{ Name: 'Queue', Value: RABBITMQ_NAMES.inventoryQueue }]),
    });
    t.rabbit.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'OutboxNeedsAttention',
    });
    t.rabbit.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(1 minute)' });
    t.rabbit.allResourcesProperties('AWS::ApiGatewayV2::Route', { AuthorizationType: 'AWS_IAM' });
  });

  it('cdk-nag (AwsSolutions) reports no unacknowledged error', () => {
    expect(() => t.app.synth()).not.toThrow();
  });

  it("cfn-lint accepts the template (W3005 ignored, as CDK emits it; W6001 too: the stack outputs the data stack's cluster and secrets for the CLI)", () => {
    if (spawnSync('sh', ['-c', 'command -v cfn-lint']).status !== 0) {
      console.info('cfn-lint is not on PATH: skipped');
      return;
    }
    const file = join(mkdtempSync(join(tmpdir(), 'cfn-')), 'rabbit.json');
    writeFileSync(file, JSON.stringify(t.rabbit.toJSON()));
    const out = spawnSync('cfn-lint', ['--ignore-checks', 'W3005', 'W6001', '--', file], {
      encoding: 'utf8',
    });
    expect(out.stdout + out.stderr).toBe('');
    expect(out.status).toBe(0);
  });
});
