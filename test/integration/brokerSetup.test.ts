import { randomUUID } from 'node:crypto';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localLambdaContext } from '../../devkit/triggers/lambdaContext.js';
import { DEFAULT_RETENTION, DEFAULT_RETRY_BUDGET, newEnvelope } from '../../shared/index.js';
import { RABBITMQ_NAMES, RETRY_NAMES, retryQueueName } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { parseBrokerSecret } from '../../shared/transport/rabbitmq/brokerSecret.js';
import { pipelinePermissions } from '../../shared/transport/rabbitmq/brokerUsers.js';
import { declaredTopology, rabbitRetryDelays } from '../../shared/transport/rabbitmq/index.js';
import { publishQueueMetrics } from '../../shared/transport/rabbitmq/queueMetrics.js';
import { createTestVhost, type TestVhost } from '../helpers/rabbit.js';
import { AMQP_URL, RABBITMQ_MANAGEMENT_URL, uniqueName } from '../helpers/services.js';
import { SQS_SERVERS } from '../helpers/sqs.js';

const moto = SQS_SERVERS.find((s) => s.name === 'moto');

/**
 * The deployed RabbitMQ pipeline's start-up path, end to end on real services: the broker
 * credentials are a secret in Secrets Manager (moto_server), the functions read them at cold start
 * (never from their environment), and the broker-setup custom resource declares the topology and
 * applies its policies through the management API (local RabbitMQ, its own virtual host).
 */
describe.skipIf(!moto)('broker-setup custom resource with credentials from Secrets Manager', () => {
  let v: TestVhost;
  const saved = { ...process.env };
  const pipelineUser = uniqueName('pipeline');

  beforeAll(async () => {
    v = await createTestVhost('broker-setup');
    const endpoint = moto?.endpoint as string;
    Object.assign(process.env, {
      AWS_ACCESS_KEY_ID: 'testing',
      AWS_SECRET_ACCESS_KEY: 'testing',
      AWS_REGION: 'us-east-1',
      AWS_ENDPOINT_URL_SECRETS_MANAGER: endpoint,
    });
    const local = new URL(AMQP_URL);
    const secret = await new SecretsManagerClient({ region: 'us-east-1' }).send(
      new CreateSecretCommand({
        Name: `broker-${v.vhost}`,
        SecretString: JSON.stringify({
          username: decodeURIComponent(local.username),
          password: decodeURIComponent(local.password),
        }),
      }),
    );
    const pipelineSecret = await new SecretsManagerClient({ region: 'us-east-1' }).send(
      new CreateSecretCommand({
        Name: `broker-pipeline-${v.vhost}`,
        SecretString: JSON.stringify({ username: pipelineUser, password: randomUUID() }),
      }),
    );
    const management = new URL(RABBITMQ_MANAGEMENT_URL);
    management.username = '';
    management.password = '';
    Object.assign(process.env, {
      BROKER_SECRET_ARN: secret.ARN,
      BROKER_PIPELINE_SECRET_ARN: pipelineSecret.ARN,
      // as Amazon MQ reports it: no credentials, no virtual host
      BROKER_AMQP_ENDPOINT: `${local.protocol}//${local.host}`,
      BROKER_MANAGEMENT_ENDPOINT: management.origin,
      BROKER_VHOST: v.vhost,
    });
  });

  afterAll(async () => {
    const { sharedRabbit } = await import('../../functions/commons/clients.js');
    await sharedRabbit().close();
    process.env = saved;
    await v?.management
      .request('DELETE', `/api/users/${encodeURIComponent(pipelineUser)}`)
      .catch(() => {});
    await v?.delete();
  });

  it('declares every queue and applies the policies; a repeat (Update) changes nothing', async () => {
    const { handler } = await import('../../functions/broker-setup/index.js');
    const event = {
      RequestType: 'Create',
      ResourceProperties: { ServiceToken: 'x', version: 'test' },
    } as unknown as CloudFormationCustomResourceEvent;
    const created = await handler(event, localLambdaContext('broker-setup'));
    const declared = declaredTopology(
      PIPELINE_TOPOLOGY,
      DEFAULT_RETRY_BUDGET,
      DEFAULT_RETENTION,
    ).topology.queues.map((q) => q.name);
    expect(created).toMatchObject({
      PhysicalResourceId: `broker-topology:${v.vhost}`,
      Data: {
        queues: declared.length,
        rabbitmqVersion: expect.stringMatching(/^\d+\.\d+/),
        pipelineUser,
      },
    });
    // the pipeline user of the second secret, with rights on the declared names of this vhost only
    const perms = await v.management.request<{ vhost: string; read: string }[]>(
      'GET',
      `/api/users/${encodeURIComponent(pipelineUser)}/permissions`,
    );
    expect(perms).toEqual([
      expect.objectContaining({
        vhost: v.vhost,
        read: pipelinePermissions(
          declaredTopology(PIPELINE_TOPOLOGY, DEFAULT_RETRY_BUDGET, DEFAULT_RETENTION).topology,
        ).read,
      }),
    ]);
    const queues = await v.management.request<{ name: string; type: string }[]>(
      'GET',
      `/api/queues/${encodeURIComponent(v.vhost)}`,
    );
    expect(queues?.map((q) => q.name).sort()).toEqual([...declared].sort());
    expect(queues?.every((q) => q.type === 'quorum')).toBe(true);
    const policies = await v.management.request<
      { name: string; definition: Record<string, unknown> }[]
    >('GET', `/api/policies/${encodeURIComponent(v.vhost)}`);
    const byName = new Map(policies?.map((p) => [p.name, p.definition]));
    expect(byName.get(RABBITMQ_NAMES.inventoryQueue)).toMatchObject({
      'delivery-limit': 10,
      'dead-letter-exchange': RETRY_NAMES.parkingExchange,
    });
    const firstDelay = DEFAULT_RETRY_BUDGET.ladderMs[0] as number;
    expect(byName.get(retryQueueName(firstDelay))).toMatchObject({ 'message-ttl': firstDelay });
    // results over their delivery limit are parked, never dropped (RabbitMQ 4's default limit)
    expect(byName.get(RABBITMQ_NAMES.inventoryResultsQueue)).toMatchObject({
      'delivery-limit': 50,
      'dead-letter-exchange': RABBITMQ_NAMES.resultsParkingExchange,
      'dead-letter-strategy': 'at-least-once',
    });
    const rights = new RegExp(perms?.[0]?.read ?? '^$');
    for (const name of [
      RABBITMQ_NAMES.resultsParkingQueue,
      RABBITMQ_NAMES.resultsParkingExchange,
    ]) {
      expect(rights.test(name), name).toBe(true);
    }

    const updated = await handler(
      { ...event, RequestType: 'Update', PhysicalResourceId: created.PhysicalResourceId } as never,
      localLambdaContext('broker-setup'),
    );
    expect(updated.PhysicalResourceId).toBe(created.PhysicalResourceId);
  });

  it("the relay publishes queue depths from the backend's inspection", async () => {
    const { sharedRabbit } = await import('../../functions/commons/clients.js');
    const backend = sharedRabbit();
    const orders = Array.from({ length: 2 }, () =>
      newEnvelope({
        type: 'order.created',
        aggregate: { type: 'order', id: randomUUID(), version: 1 },
        data: {},
        correlationId: 'queue-metrics',
        producer: 'test',
      }),
    );
    const outcomes = await backend.publisher('outbox').publish(orders);
    expect(outcomes.every((o) => o.ok)).toBe(true);
    const seen = publishQueueMetrics(await backend.inspect());
    expect(seen).toEqual({
      [RABBITMQ_NAMES.inventoryQueue]: { depth: 2, ready: 2, routeMissing: 0, held: 0 },
      [RETRY_NAMES.parkingQueue]: { depth: 0, ready: 0 },
      // the queues bounded for want of a consumer, and every declared route present
      [RABBITMQ_NAMES.auditQueue]: { depth: 2, ready: 2 },
      [RABBITMQ_NAMES.inventoryResultsQueue]: { depth: 0, ready: 0, routeMissing: 0 },
      // the results parking lot (its alarm's metric)
      [RABBITMQ_NAMES.resultsParkingQueue]: { depth: 0, ready: 0 },
      // the retry delay queues, bounded for when their requeue route is gone
      ...Object.fromEntries(
        rabbitRetryDelays(DEFAULT_RETRY_BUDGET).map((d) => [
          retryQueueName(d),
          { depth: 0, ready: 0 },
        ]),
      ),
    });
  });
});

describe('broker secret parsing', () => {
  it('names what is missing, and never echoes the value', () => {
    expect(() => parseBrokerSecret('{"username":"u"}')).toThrow(/missing or empty password/);
    expect(() => parseBrokerSecret('s3cret')).toThrow(/not JSON/);
    expect(() => parseBrokerSecret('s3cret')).not.toThrow(/s3cret/);
    expect(parseBrokerSecret('{"username":"u","password":"p","engine":"x"}')).toEqual({
      username: 'u',
      password: 'p',
    });
  });
});
