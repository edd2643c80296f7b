import { Match } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { pipelineConfig } from '../../infra/config.js';
import { RABBITMQ_NAMES, RETRY_NAMES, retryQueueName } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import {
  declaredTopology,
  QUEUE_BOUNDS,
  rabbitRetryDelays,
} from '../../shared/transport/rabbitmq/index.js';
import { synthPipelines } from '../helpers/templates.js';

const config = pipelineConfig();

/** Every queue has a consumer or a bound, and an alarm before the bound bites. */
describe('CDK: bounded queues and missing routes', () => {
  let t: ReturnType<typeof synthPipelines>;
  beforeAll(() => {
    t = synthPipelines();
  });

  it('every declared RabbitMQ queue without a consumer here, and the parking lot, has a policy bound', () => {
    const { topology, policies } = declaredTopology(
      PIPELINE_TOPOLOGY,
      config.budget,
      config.retention,
    );
    const byName = new Map(policies.map((p) => [p.name, p.definition]));
    // consumers: inventory.orders (inventory), orders.inventory-results (the order side)
    for (const q of topology.queues) {
      const d = byName.get(q.name) ?? {};
      // a length bound on each (a TTL alone does not bound a retry queue whose expired copies
      // are held because the requeue route is gone: at-least-once dead lettering)
      const bounded = 'max-length' in d;
      expect({ queue: q.name, bounded }).toEqual({
        queue: q.name,
        bounded: q.name !== RABBITMQ_NAMES.inventoryQueue,
      });
      if ('max-length' in d) expect(d).toHaveProperty('overflow');
    }
    expect(byName.get(RABBITMQ_NAMES.auditQueue)).toMatchObject({ overflow: 'drop-head' });
    expect(byName.get(RABBITMQ_NAMES.inventoryResultsQueue)).toMatchObject({
      overflow: 'reject-publish',
    });
    expect(byName.get(RABBITMQ_NAMES.inventoryResultsQueue)).not.toHaveProperty('message-ttl');
    // never dropped over a delivery limit (RabbitMQ 4's default of 20): parked, at least once
    expect(byName.get(RABBITMQ_NAMES.inventoryResultsQueue)).toMatchObject({
      'dead-letter-exchange': RABBITMQ_NAMES.resultsParkingExchange,
      'dead-letter-routing-key': RABBITMQ_NAMES.resultsParkingRoutingKey,
      'dead-letter-strategy': 'at-least-once',
      'delivery-limit': expect.any(Number),
    });
    const parkingBinding = topology.queues.find(
      (q) => q.name === RABBITMQ_NAMES.resultsParkingQueue,
    )?.bindings;
    expect(parkingBinding).toEqual([
      {
        exchange: RABBITMQ_NAMES.resultsParkingExchange,
        pattern: RABBITMQ_NAMES.resultsParkingRoutingKey,
      },
    ]);
    expect(byName.get(RABBITMQ_NAMES.resultsParkingQueue)).toMatchObject({
      'message-ttl': config.retention.parkingMs,
      'max-length': QUEUE_BOUNDS.resultsParking.maxLength,
      overflow: 'reject-publish',
    });
  });

  it('RabbitMQ: alarms at 80 % of each bound, and on a missing route within one minute', () => {
    for (const [queue, maxLength] of [
      [RABBITMQ_NAMES.auditQueue, QUEUE_BOUNDS.audit.maxLength],
      [RABBITMQ_NAMES.inventoryResultsQueue, QUEUE_BOUNDS.inventoryResults.maxLength],
      [RETRY_NAMES.parkingQueue, QUEUE_BOUNDS.parking.maxLength],
      [RABBITMQ_NAMES.resultsParkingQueue, QUEUE_BOUNDS.resultsParking.maxLength],
      ...rabbitRetryDelays(config.budget).map(
        (delay) => [retryQueueName(delay), QUEUE_BOUNDS.retry.maxLength] as const,
      ),
    ] as const) {
      t.rabbit.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'ReliableMessaging',
        MetricName: 'QueueReady',
        Dimensions: Match.arrayWith([{ Name: 'Queue', Value: queue }]),
        Threshold: maxLength * 0.8,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        AlarmActions: [Match.anyValue()],
      });
    }
    for (const queue of [RABBITMQ_NAMES.inventoryQueue, RABBITMQ_NAMES.inventoryResultsQueue]) {
      t.rabbit.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'ReliableMessaging',
        MetricName: 'RouteMissing',
        Dimensions: Match.arrayWith([
          { Name: 'Queue', Value: queue },
          { Name: 'service', Value: 'outbox-relay' },
        ]),
        Statistic: 'Maximum',
        Period: 60,
        EvaluationPeriods: 1,
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        AlarmActions: [Match.anyValue()],
      });
    }
  });

  it('SQS: the results queue sets its retention (the bound) and alarms on age and backlog; its parking on any message', () => {
    t.sqs.hasResourceProperties('AWS::SQS::Queue', {
      QueueName: config.names.inventoryResultsQueue,
      MessageRetentionPeriod: config.sqs.resultsRetentionSeconds,
    });
    t.sqs.hasResourceProperties('AWS::SQS::Queue', {
      QueueName: `${config.names.inventoryResultsQueue}-parking`,
      MessageRetentionPeriod: config.retention.parkingMs / 1000,
    });
    // every result reaches its parking queue by the redrive policy, its enqueue time kept: it
    // stays there the difference (10 days), never expiring on arrival
    expect(config.retention.parkingMs / 1000 - config.sqs.resultsRetentionSeconds).toBe(
      10 * 24 * 3600,
    );
    const results = t.sqs.findResources('AWS::SQS::Queue', {
      Properties: { QueueName: config.names.inventoryResultsQueue },
    });
    const resultsId = Object.keys(results)[0] as string;
    t.sqs.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'ApproximateAgeOfOldestMessage',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [resultsId, 'QueueName'] } }],
      Threshold: config.sqs.resultsRetentionSeconds / 2,
      AlarmActions: [Match.anyValue()],
    });
    t.sqs.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [resultsId, 'QueueName'] } }],
      Threshold: 1_000,
    });
  });
});
