import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Duration, Stack, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { SecurityGroup, Vpc } from 'aws-cdk-lib/aws-ec2';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  type AmazonMqAccess,
  AmazonMqConsumer,
  BrokerSetup,
  NodeFunction,
  OutboxRelayFunction,
  PipelineAlarms,
  ServerlessDatabase,
  SqsConsumer,
} from '../../infra/constructs/index.js';
import { MIGRATIONS_SOURCE } from '../../infra/paths.js';
import { SIDE_LOGINS } from '../../infra/stacks/DataStack.js';
import { ConfigError, DEFAULT_RETRY_BUDGET } from '../../shared/index.js';

/**
 * The package's CDK constructs (`reliable-messaging-serverless/cdk`) as another team uses them:
 * a stack built from them alone around a handler of its own (test/fixtures/userHandler.ts, which
 * also stands in for its relay and migrate entries: the functions are not run here), with the
 * migrations the library ships (its default) and a folder of its own.
 */
const FIXTURES = join(import.meta.dirname, '..', 'fixtures');
const ENTRY = join(FIXTURES, 'userHandler.ts');
const USER_MIGRATIONS = join(FIXTURES, 'userMigrations');

/** The user's stack: a database, a consumer of an SQS queue, the relay, the alarms. */
function userStack(app: App) {
  const stack = new Stack(app, 'Shipping');
  const db = new ServerlessDatabase(stack, 'Db', {
    logins: SIDE_LOGINS,
    migrate: { entry: ENTRY, extraMigrations: USER_MIGRATIONS },
  });
  const consumer = new SqsConsumer(stack, 'Shipments', {
    entry: ENTRY,
    database: db.login('inventory'),
  });
  const relay = new OutboxRelayFunction(stack, 'Relay', {
    entry: ENTRY,
    database: db.login('relay'),
    publishesTo: [consumer.queue],
    producers: [consumer],
  });
  const alarms = new PipelineAlarms(stack, 'Alarms');
  relay.addAlarms(alarms, { outboxes: ['shipping_outbox'] });
  consumer.addAlarms(alarms);
  return { stack, db, consumer, relay, alarms };
}

/** The AwsSolutions findings of a synthesized app: violations and acknowledged ones. */
function nagReport(outdir: string) {
  const report = JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8')) as {
    pluginReports: {
      violations: { ruleName: string; violatingConstructs: { constructPath: string }[] }[];
      suppressedViolations: { ruleName: string }[];
    }[];
  };
  const [nag] = report.pluginReports;
  return {
    violations: (nag?.violations ?? []).flatMap((v) =>
      v.violatingConstructs.map((c) => `${v.ruleName} ${c.constructPath}`),
    ),
    acknowledged: (nag?.suppressedViolations ?? []).map((v) => v.ruleName.replace(/\[.*$/, '')),
  };
}

describe('the CDK constructs around a handler of your own', () => {
  let app: App;
  let user: ReturnType<typeof userStack>;
  let t: Template;
  beforeAll(() => {
    // no bundling here (the last test bundles): the template is what is asserted
    app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    user = userStack(app);
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
    t = Template.fromStack(user.stack);
  });

  it('the consumer: its queue and parking queue (redrive policy, redrive-allow by ARN), SSE and TLS only', () => {
    const queues = t.findResources('AWS::SQS::Queue');
    const source = Object.entries(queues).find(([, q]) => q.Properties.RedrivePolicy);
    const parking = Object.entries(queues).find(([, q]) => q.Properties.RedriveAllowPolicy);
    expect(Object.keys(queues)).toHaveLength(2);
    const sourceName = source?.[1].Properties.QueueName as string;
    expect(sourceName).toMatch(/^Shipping-Shipments-[A-Za-z0-9]+$/);
    expect(source?.[1].Properties).toMatchObject({
      // 6 × the function's default timeout of 30 s
      VisibilityTimeout: 180,
      MessageRetentionPeriod: 14 * 24 * 3600,
      SqsManagedSseEnabled: true,
      RedrivePolicy: {
        deadLetterTargetArn: { 'Fn::GetAtt': [parking?.[0], 'Arn'] },
        maxReceiveCount: DEFAULT_RETRY_BUDGET.maxAttempts + 3,
      },
    });
    expect(parking?.[1].Properties).toMatchObject({
      QueueName: `${sourceName}-parking`,
      RedriveAllowPolicy: { redrivePermission: 'byQueue', sourceQueueArns: [expect.anything()] },
    });
    // by ARN, not by reference: the parking queue does not depend on its source
    expect(JSON.stringify(parking?.[1].Properties.RedriveAllowPolicy)).toContain(`:${sourceName}`);
    t.resourcePropertiesCountIs(
      'AWS::SQS::QueuePolicy',
      {
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: 'Deny',
              Condition: { Bool: { 'aws:SecureTransport': 'false' } },
            }),
          ]),
        },
      },
      2,
    );
  });

  it('the consumer: an SQS event source with partial batch responses, its settings, its grants', () => {
    t.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^ShipmentsQueue'), 'Arn'] },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BatchSize: 10,
      ScalingConfig: { MaximumConcurrency: 5 },
    });
    t.hasResourceProperties('AWS::Lambda::Function', {
      Handler: 'index.handler',
      Runtime: 'nodejs24.x',
      Architectures: ['arm64'],
      Timeout: 30,
      Environment: {
        Variables: Match.objectLike({
          POWERTOOLS_SERVICE_NAME: 'Shipments',
          TRANSPORT: 'sqs',
          DB_DRIVER: 'data-api',
          SQS_RETRY_MODE: 'visibility',
          SQS_VISIBILITY_TIMEOUT_S: '180',
          SOURCE_QUEUE_URL: { Ref: Match.stringLikeRegexp('^ShipmentsQueue') },
          PARKING_QUEUE_URL: { Ref: Match.stringLikeRegexp('^ShipmentsParking') },
          // the relay's kick
          RELAY_FUNCTION_NAME: { Ref: Match.stringLikeRegexp('^Relay') },
        }),
      },
    });
    const policy = JSON.stringify(
      Object.values(t.findResources('AWS::IAM::Policy')).find((p) =>
        JSON.stringify(p.Properties.Roles).includes('ShipmentsServiceRole'),
      ),
    );
    for (const action of ['sqs:ReceiveMessage', 'sqs:SendMessage', 'rds-data:ExecuteStatement']) {
      expect(policy).toContain(action);
    }
    expect(policy).toContain('lambda:InvokeFunction');
  });

  it('the relay: a 1-minute schedule, its state, kicked by the consumer, not retried', () => {
    t.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 minute)',
      Targets: [
        Match.objectLike({ Arn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^Relay'), 'Arn'] } }),
      ],
    });
    t.hasResourceProperties('AWS::SSM::Parameter', { Name: '/Shipping/Relay/state' });
    t.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
      MaximumRetryAttempts: 0,
      MaximumEventAgeInSeconds: 60,
    });
    t.hasResourceProperties('AWS::Lambda::Function', {
      Timeout: 60,
      Environment: {
        Variables: Match.objectLike({
          POWERTOOLS_SERVICE_NAME: 'Relay',
          RELAY_STATE_PARAMETER: { Ref: Match.stringLikeRegexp('^RelayState') },
          RELAY_DRAIN_BUDGET_MS: '50000',
        }),
      },
    });
  });

  it('the alarms: the relay per outbox table and the consumer, on one encrypted topic', () => {
    const alarms = t.findResources('AWS::CloudWatch::Alarm');
    const ids = Object.keys(alarms).map((id) =>
      id.replace(/^Alarms/, '').replace(/[0-9A-F]{8}$/, ''),
    );
    expect(ids.sort()).toEqual(
      [
        'ShippingRelayHeartbeat',
        'ShippingRelayRoundErrors',
        'ShippingOutboxBacklog',
        'ShippingOutboxOldestUnpublished',
        'ShippingOutboxNeedsAttention',
        'RelayErrors',
        'ParkedMessages',
        'NewParkedMessages',
        'OldestMessageAge',
        'ConsumerBacklog',
        'ConsumerErrors',
        'ParkRefused',
      ].sort(),
    );
    for (const alarm of Object.values(alarms)) {
      expect(alarm.Properties.AlarmActions).toHaveLength(1);
      expect(JSON.stringify(alarm.Properties.AlarmDescription)).toMatch(
        /Runbook: docs\/operations\.md#/,
      );
    }
    t.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'RelayHeartbeat',
      Dimensions: Match.arrayWith([{ Name: 'Outbox', Value: 'shipping_outbox' }]),
      TreatMissingData: 'breaching',
    });
    t.hasResourceProperties('AWS::SNS::Topic', { KmsMasterKeyId: Match.anyValue() });
  });

  it('the database: Aurora Serverless v2 with the Data API, migrations versioned by the library’s and yours', () => {
    t.hasResourceProperties('AWS::RDS::DBCluster', {
      EnableHttpEndpoint: true,
      ServerlessV2ScalingConfiguration: { MinCapacity: 0, MaxCapacity: 4 },
    });
    const version = (template: Template) =>
      Object.values(template.findResources('Custom::Migrations'))[0]?.Properties.version;
    const libraryOnly = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(libraryOnly, 'LibraryOnly');
    new ServerlessDatabase(stack, 'Db', {
      logins: SIDE_LOGINS,
      migrate: { entry: ENTRY, migrations: MIGRATIONS_SOURCE },
    });
    expect(version(t)).toMatch(/^[0-9a-f]{16}$/);
    expect(version(Template.fromStack(stack))).toMatch(/^[0-9a-f]{16}$/);
    expect(version(t)).not.toBe(version(Template.fromStack(stack)));
  });

  it('passes cdk-nag (AwsSolutions): no violation, only the acknowledged findings', () => {
    const assembly = app.synth();
    const { violations, acknowledged } = nagReport(assembly.directory);
    expect(violations).toEqual([]);
    expect(new Set(acknowledged)).toEqual(
      new Set(['AwsSolutions-IAM4', 'AwsSolutions-IAM5', 'AwsSolutions-SMG4']),
    );
  });
});

describe('the CDK constructs refuse what would not work', () => {
  const stack = () => new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'S');

  it('a visibility timeout below 6 × the function timeout, or a queue kept longer than its parking', () => {
    expect(
      () =>
        new SqsConsumer(stack(), 'C', {
          entry: ENTRY,
          timeoutSeconds: 60,
          queue: { visibilityTimeoutSeconds: 300 },
        }),
    ).toThrow(ConfigError);
    expect(
      () =>
        new SqsConsumer(stack(), 'C', {
          entry: ENTRY,
          queue: { retention: Duration.days(14) },
          parking: { retention: Duration.days(3) },
        }),
    ).toThrow(/must be at most the parking queue's/);
    // the source's retention follows a shorter parking retention by default
    const s = stack();
    new SqsConsumer(s, 'C', { entry: ENTRY, parking: { retention: Duration.days(3) } });
    Template.fromStack(s).resourcePropertiesCountIs(
      'AWS::SQS::Queue',
      { MessageRetentionPeriod: 3 * 24 * 3600 },
      2,
    );
  });

  it('a handler that is not an absolute path to a file, or no handler', () => {
    expect(
      () => new NodeFunction(stack(), 'F', { entry: 'userHandler.ts', timeoutSeconds: 3 }),
    ).toThrow(/not an absolute path/);
    expect(() => new NodeFunction(stack(), 'F', { timeoutSeconds: 3 })).toThrow(/pass `entry`/);
    expect(
      () => new NodeFunction(stack(), 'F', { name: 'no-such-function', timeoutSeconds: 3 }),
    ).toThrow(/no functions\/no-such-function\/index\.ts/);
  });

  it('a migration of yours named like one of the library’s', () => {
    expect(
      () =>
        new ServerlessDatabase(stack(), 'Db', {
          logins: SIDE_LOGINS,
          migrate: {
            entry: ENTRY,
            migrations: MIGRATIONS_SOURCE,
            extraMigrations: MIGRATIONS_SOURCE,
          },
        }),
    ).toThrow(/0001_inventory_tables\.sql is in/);
  });
});

describe('a consumer on Amazon MQ for RabbitMQ, on a broker that exists', () => {
  let t: Template;
  let app: App;
  beforeAll(() => {
    app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'Rabbit', {
      env: { account: '123456789012', region: 'eu-west-1' },
    });
    const vpc = Vpc.fromVpcAttributes(stack, 'Vpc', {
      vpcId: 'vpc-0123456789abcdef0',
      availabilityZones: ['eu-west-1a'],
      privateSubnetIds: ['subnet-0123456789abcdef0'],
    });
    const network = {
      vpc,
      securityGroup: SecurityGroup.fromSecurityGroupId(stack, 'Sg', 'sg-0123456789abcdef0'),
    };
    const broker = (name: string): AmazonMqAccess => ({
      brokerArn: 'arn:aws:mq:eu-west-1:123456789012:broker:shipping:b-1234',
      brokerId: 'b-1234',
      secret: Secret.fromSecretCompleteArn(
        stack,
        name,
        `arn:aws:secretsmanager:eu-west-1:123456789012:secret:${name}-AbCdEf`,
      ),
      amqpEndpoint: 'amqps://b-1234.mq.eu-west-1.on.aws:5671',
      managementEndpoint: 'https://b-1234.mq.eu-west-1.on.aws',
      vhost: '/',
      network,
    });
    const pipeline = broker('pipeline');
    const setup = new BrokerSetup(stack, 'Setup', {
      entry: ENTRY,
      broker: broker('admin'),
      pipelineUser: pipeline.secret,
      declared: { queues: ['shipping.orders'] },
    });
    const consumer = new AmazonMqConsumer(stack, 'Shipments', {
      entry: ENTRY,
      broker: pipeline,
      queue: 'shipping.orders',
      dependsOn: [setup.topology],
    });
    const relay = new OutboxRelayFunction(stack, 'Relay', { entry: ENTRY, broker: pipeline });
    const alarms = new PipelineAlarms(stack, 'Alarms');
    relay.addAlarms(alarms, { outboxes: ['outbox'], brokerQueueMetrics: { brokerId: 'b-1234' } });
    consumer.addAlarms(alarms);
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    t = Template.fromStack(stack);
  });

  it('the event source reads the queue as the pipeline user once the topology is applied', () => {
    const mappings = t.findResources('AWS::Lambda::EventSourceMapping');
    expect(Object.keys(mappings)).toEqual(['ShipmentsTrigger']);
    expect(mappings.ShipmentsTrigger).toMatchObject({
      Properties: {
        Queues: ['shipping.orders'],
        BatchSize: 100,
        SourceAccessConfigurations: [
          { Type: 'BASIC_AUTH', URI: expect.stringMatching(/secret:pipeline-/) },
          { Type: 'VIRTUAL_HOST', URI: '/' },
        ],
      },
      DependsOn: expect.arrayContaining(['BrokerTopology']),
    });
    t.hasResourceProperties('Custom::BrokerTopology', {
      version: Match.stringLikeRegexp('^[0-9a-f]{16}$'),
    });
    t.hasResourceProperties('AWS::Lambda::Function', {
      VpcConfig: {
        SubnetIds: ['subnet-0123456789abcdef0'],
        SecurityGroupIds: ['sg-0123456789abcdef0'],
      },
      Environment: { Variables: Match.objectLike({ TRANSPORT: 'rabbitmq', BROKER_VHOST: '/' }) },
    });
  });

  it('its alarms watch the depths the relay reads from the broker; cdk-nag passes', () => {
    for (const id of [
      'ParkedMessages',
      'ConsumerBacklog',
      'HeldForDeadLettering',
      'QueueMetricsUnavailable',
    ]) {
      expect(
        Object.keys(t.findResources('AWS::CloudWatch::Alarm')).some((k) =>
          k.startsWith(`Alarms${id}`),
        ),
        id,
      ).toBe(true);
    }
    t.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'QueueDepth',
      Dimensions: Match.arrayWith([{ Name: 'Queue', Value: 'shipping.orders.parking' }]),
    });
    expect(nagReport(app.synth().directory).violations).toEqual([]);
  });
});

describe('bundled: your handler, and your migrations and logins beside the migrate function', () => {
  it('synthesizes with esbuild', () => {
    const outdir = join(tmpdir(), `constructs-${process.pid}-${Date.now()}`);
    const app = new App({ outdir, context: { 'aws:cdk:enable-asset-metadata': true } });
    const stack = new Stack(app, 'Bundled');
    const db = new ServerlessDatabase(stack, 'Db', {
      deletionProtection: false,
      logins: { shipments: { username: 'shipments_fn', group: 'shipments_rw' } },
      migrate: { entry: ENTRY, migrations: USER_MIGRATIONS },
    });
    const consumer = new SqsConsumer(stack, 'Shipments', {
      entry: ENTRY,
      database: db.login('shipments'),
    });
    const assembly = app.synth();
    const template = assembly.getStackByName('Bundled').template as {
      Resources: Record<string, { Type: string; Metadata?: Record<string, string> }>;
    };
    const assetOf = (construct: NodeFunction) => {
      const id = stack.getLogicalId(construct.node.defaultChild as never);
      return join(
        assembly.directory,
        template.Resources[id]?.Metadata?.['aws:asset:path'] as string,
      );
    };
    expect(readFileSync(join(assetOf(consumer), 'index.mjs'), 'utf8')).toContain('received');
    // yours only: the library's tables come from your handler (libraryMigrations)
    const shipped = readdirSync(join(assetOf(db.migrations), 'migrations')).sort();
    expect(shipped).toEqual(['1001_shipments.sql']);
    expect(existsSync(join(assetOf(db.migrations), 'index.mjs'))).toBe(true);
    // your login, by its group role; none of the reference deployment's
    const variables = (id: string) =>
      (
        template.Resources[id] as unknown as {
          Properties: { Environment: { Variables: Record<string, unknown> } };
        }
      ).Properties.Environment.Variables;
    const migrate = variables(stack.getLogicalId(db.migrations.node.defaultChild as never));
    expect(JSON.stringify(migrate.DB_LOGIN_SECRETS)).toMatch(/shipments_rw=/);
    expect(Object.keys(migrate).filter((k) => /_DB_SECRET_ARN$/.test(k))).toEqual([]);
    expect(
      Object.values(template.Resources).filter((r) => r.Type === 'AWS::SecretsManager::Secret'),
    ).toHaveLength(2); // the master's and shipments_fn's
    expect(
      variables(stack.getLogicalId(consumer.node.defaultChild as never)).DATA_API_SECRET_ARN,
    ).toEqual({
      Ref: expect.stringMatching(/^ShipmentsDbSecret/),
    });
  }, 120_000);
});
