import { execFile } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { EventBridgeClient, ListRulesCommand } from '@aws-sdk/client-eventbridge';
import {
  LambdaClient,
  ListEventSourceMappingsCommand,
  ListFunctionsCommand,
} from '@aws-sdk/client-lambda';
import { GetQueueAttributesCommand, GetQueueUrlCommand } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { pipelineConfig } from '../../infra/config.js';
import { createSqsClient } from '../../shared/transport/sqs/index.js';
import { SQS_SERVERS } from '../helpers/sqs.js';

const moto = SQS_SERVERS.find((s) => s.name === 'moto');
const config = pipelineConfig();

// moto has no Aurora, alarms or API Gateway v2: the SQS pipeline stack deploys alone with stand-in
// database ARNs (`-c emulator=moto`), and the deployed resources are read back with SDK clients.
describe.skipIf(!moto)('cdk deploy of the SQS pipeline stack against moto_server', () => {
  it('bootstraps, deploys, and the queues, functions, event source mapping and schedules exist as configured', {
    timeout: 180_000,
  }, async () => {
    const endpoint = moto?.endpoint as string;
    const env = {
      ...process.env,
      AWS_ACCESS_KEY_ID: 'testing',
      AWS_SECRET_ACCESS_KEY: 'testing',
      AWS_REGION: 'us-east-1',
      AWS_DEFAULT_REGION: 'us-east-1',
      AWS_ENDPOINT_URL: endpoint, // localhost, not 127.0.0.1: moto then reads the template URL's bucket right
    };
    const out = await mkdtemp(join(tmpdir(), 'cdk-moto-'));
    const cdk = (args: string[]) =>
      promisify(execFile)(
        process.execPath,
        ['node_modules/aws-cdk/bin/cdk', ...args, '-c', 'emulator=moto', '-o', out],
        {
          env,
          maxBuffer: 16 * 1024 * 1024,
        },
      );
    await cdk(['bootstrap', 'aws://123456789012/us-east-1']);
    await cdk(['deploy', 'ReliableMessagingSqs', '--require-approval', 'never']);

    const clientConfig = {
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    };
    const sqs = createSqsClient({ endpoint });
    const lambda = new LambdaClient(clientConfig);
    const events = new EventBridgeClient(clientConfig);
    try {
      const { QueueUrl } = await sqs.send(
        new GetQueueUrlCommand({ QueueName: config.names.inventoryQueue }),
      );
      const { Attributes } = await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['All'] }),
      );
      expect(Number(Attributes?.VisibilityTimeout)).toBe(config.sqs.visibilityTimeoutSeconds);
      expect(JSON.parse(Attributes?.RedrivePolicy ?? '{}')).toMatchObject({
        maxReceiveCount: config.sqs.maxReceiveCount,
      });
      await sqs.send(new GetQueueUrlCommand({ QueueName: config.names.parkingQueue }));

      const functions = (await lambda.send(new ListFunctionsCommand({}))).Functions ?? [];
      const ours = functions.filter((f) => f.FunctionName?.startsWith('ReliableMessagingSqs-'));
      // place-order, outbox-relay, reserve-inventory-sqs, order-results-sqs, maintenance
      expect(ours).toHaveLength(5);
      expect(new Set(ours.map((f) => f.Runtime))).toEqual(new Set(['nodejs24.x']));
      const mappings =
        (await lambda.send(new ListEventSourceMappingsCommand({}))).EventSourceMappings ?? [];
      // the inventory consumer's and the order side's results consumer's
      const sqsMappings = mappings.filter((m) =>
        m.FunctionResponseTypes?.includes('ReportBatchItemFailures'),
      );
      expect(sqsMappings).toHaveLength(2);
      for (const m of sqsMappings) {
        expect(m).toMatchObject({
          BatchSize: config.sqs.batchSize,
          ScalingConfig: { MaximumConcurrency: config.sqs.maxConcurrency },
        });
      }
      const rules = (await events.send(new ListRulesCommand({}))).Rules ?? [];
      expect(rules.map((r) => r.ScheduleExpression).sort()).toEqual([
        'rate(1 day)',
        'rate(1 minute)',
      ]);
    } finally {
      sqs.destroy();
      lambda.destroy();
      events.destroy();
    }
  });
});
