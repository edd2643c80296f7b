import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { pipelineConfig } from '../../infra/config.js';
import { dataApiAccess, functionEnvironment } from '../../infra/constructs/index.js';
import { DataStack } from '../../infra/stacks/DataStack.js';
import { SqsPipelineStack } from '../../infra/stacks/SqsPipelineStack.js';

const config = pipelineConfig();

function synth() {
  // no bundling in tests (esbuild runs on `cdk synth`): the templates are what we assert
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const data = new DataStack(app, 'Data');
  const pipeline = new SqsPipelineStack(app, 'Sqs', {
    config,
    database: dataApiAccess(data.cluster, data.databaseName, data.dbSecrets),
    inventoryDatabaseName: data.inventoryDatabaseName,
  });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return { app, data: Template.fromStack(data), sqs: Template.fromStack(pipeline) };
}

describe('CDK: data stack and SQS pipeline stack', () => {
  let t: ReturnType<typeof synth>;
  beforeAll(() => {
    t = synth();
  });

  it('queues carry the settings of the shared config module', () => {
    t.sqs.hasResourceProperties('AWS::SQS::Queue', {
      QueueName: config.names.inventoryQueue,
      VisibilityTimeout: config.sqs.visibilityTimeoutSeconds,
      MessageRetentionPeriod: config.sqs.sourceRetentionSeconds,
      SqsManagedSseEnabled: true,
      RedrivePolicy: {
        deadLetterTargetArn: Match.anyValue(),
        maxReceiveCount: config.budget.maxAttempts + 3,
      },
    });
    t.sqs.hasResourceProperties('AWS::SQS::Queue', {
      QueueName: config.names.parkingQueue,
      MessageRetentionPeriod: config.retention.parkingMs / 1000,
      RedriveAllowPolicy: { redrivePermission: 'byQueue', sourceQueueArns: [Match.anyValue()] },
    });
    // AWS's rule for SQS event sources, checked on the synthesized values
    expect(config.sqs.visibilityTimeoutSeconds).toBeGreaterThanOrEqual(
      6 * config.timeoutsSeconds.reserve,
    );
    // both at SQS's maximum: the consumer parks a new message (its own 14 days); only the redrive
    // policy's safety net moves the original, with its enqueue time (docs/design.md §5)
    expect(config.sqs.sourceRetentionSeconds).toBe(14 * 24 * 3600);
    expect(config.retention.parkingMs / 1000).toBe(config.sqs.sourceRetentionSeconds);
  });

  it('functions: nodejs24.x on arm64, their own log groups, the retry budget in their environment', () => {
    t.sqs.resourcePropertiesCountIs(
      'AWS::Lambda::Function',
      { Runtime: 'nodejs24.x', Architectures: ['arm64'] },
      5,
    );
    t.sqs.resourceCountIs('AWS::Logs::LogGroup', 6); // 5 functions + API access logs
    t.sqs.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: Match.objectLike({
          ...functionEnvironment({ budget: config.budget }),
          DB_DRIVER: 'data-api',
          TRANSPORT: 'sqs',
        }),
      },
    });
  });

  it('order-results reads the results queue on an SQS event source with partial batch responses', () => {
    const results = t.sqs.findResources('AWS::SQS::Queue', {
      Properties: { QueueName: config.names.inventoryResultsQueue },
    });
    const [resultsId, resultsQueue] = Object.entries(results)[0] ?? [];
    expect(resultsId).toBeDefined();
    // AWS's rule for SQS event sources (≥ 6 × the function timeout), and a parking queue
    expect(resultsQueue).toMatchObject({
      Properties: {
        VisibilityTimeout: config.sqs.visibilityTimeoutSeconds,
        RedrivePolicy: { maxReceiveCount: config.sqs.maxReceiveCount },
      },
    });
    t.sqs.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [resultsId, 'Arn'] },
      FunctionName: { Ref: Match.stringLikeRegexp('^orderresultssqs') },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      ScalingConfig: { MaximumConcurrency: config.sqs.maxConcurrency },
    });
    t.sqs.hasResourceProperties('AWS::Lambda::Function', {
      Timeout: config.timeoutsSeconds.reserve,
      Environment: {
        Variables: Match.objectLike({
          POWERTOOLS_SERVICE_NAME: 'order-results-sqs',
          RESULTS_QUEUE_URL: { Ref: resultsId },
        }),
      },
    });
  });

  it('reserve runs on an SQS event source with partial batch responses and a concurrency cap', () => {
    t.sqs.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      BatchSize: config.sqs.batchSize,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      ScalingConfig: { MaximumConcurrency: config.sqs.maxConcurrency },
    });
  });

  it('the relay runs every minute, maintenance daily; the HTTP API requires IAM auth', () => {
    t.sqs.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(1 minute)' });
    t.sqs.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(1 day)' });
    t.sqs.allResourcesProperties('AWS::ApiGatewayV2::Route', { AuthorizationType: 'AWS_IAM' });
    t.sqs.resourceCountIs('AWS::ApiGatewayV2::Route', 3);
  });

  it('Aurora Serverless v2 with the Data API, min capacity 0 pausing after 300 s idle (written out), encrypted, AZs pinned', () => {
    t.data.hasResourceProperties('AWS::RDS::DBCluster', {
      Engine: 'aurora-postgresql',
      EnableHttpEndpoint: true,
      StorageEncrypted: true,
      ServerlessV2ScalingConfiguration: {
        MinCapacity: 0,
        MaxCapacity: 4,
        SecondsUntilAutoPause: 300,
      },
    });
  });

  it('alarms on one SNS topic: parking arrivals, oldest message, outbox backlog / age / attention, function errors', () => {
    // parking ×2, source age and backlog; 5 per outbox ×2; relay errors, reserve and maintenance
    // errors, order-results errors; the results queues' 4 (QueueBoundAlarms); park refused
    // (test/infra/alarms.test.ts asserts what each one watches)
    t.sqs.resourceCountIs('AWS::CloudWatch::Alarm', 23);
    t.sqs.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Threshold: 0,
      AlarmActions: [Match.anyValue()],
    });
    t.sqs.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'ReliableMessaging',
      MetricName: 'OutboxNeedsAttention',
      Dimensions: Match.arrayWith([
        { Name: 'Outbox', Value: 'outbox' },
        { Name: 'service', Value: 'outbox-relay' },
      ]),
    });
    // the alarms' topic and inventory's event topic (fan-out)
    t.sqs.resourceCountIs('AWS::SNS::Topic', 2);
  });

  it('migrations run on deploy: a custom resource versioned by the migration files, through the Data API', () => {
    t.data.hasResourceProperties('Custom::Migrations', {
      version: Match.stringLikeRegexp('^[0-9a-f]{16}$'),
    });
    t.data.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: Match.objectLike({
          DB_DRIVER: 'data-api',
          MIGRATIONS_DIR: '/var/task/migrations',
        }),
      },
    });
  });

  it('cdk-nag (AwsSolutions) reports no unacknowledged error: synthesis would throw "Validation failed"', () => {
    expect(() => t.app.synth()).not.toThrow();
  });

  it("cfn-lint accepts both templates (W3005 redundant DependsOn is ignored, as CDK emits it; W6001 too: the pipeline stack outputs the data stack's cluster and secrets, so that one stack names what an operator reaches)", () => {
    const which = spawnSync('sh', ['-c', 'command -v cfn-lint']);
    if (which.status !== 0) {
      console.info('cfn-lint is not on PATH: skipped');
      return;
    }
    const dir = mkdtempSync(join(tmpdir(), 'cfn-'));
    for (const [name, template] of [
      ['data', t.data],
      ['sqs', t.sqs],
    ] as const) {
      const file = join(dir, `${name}.json`);
      writeFileSync(file, JSON.stringify(template.toJSON()));
      const out = spawnSync('cfn-lint', ['--ignore-checks', 'W3005', 'W6001', '--', file], {
        encoding: 'utf8',
      });
      expect(out.stdout + out.stderr, name).toBe('');
      expect(out.status, name).toBe(0);
    }
  });
});
