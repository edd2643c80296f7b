import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_RETENTION, DEFAULT_RETRY_BUDGET, newEnvelope } from '../../shared/index.js';
import { RABBITMQ_NAMES, RETRY_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import {
  PIPELINE_USER_TAGS,
  pipelinePermissions,
} from '../../shared/transport/rabbitmq/brokerUsers.js';
import {
  declaredTopology,
  ensurePipelineUser,
  RabbitManagement,
  type RabbitMqBackend,
} from '../../shared/transport/rabbitmq/index.js';
import { rabbitmqBackend } from '../../shared/transport/rabbitmq/RabbitMqBackend.js';
import { createTestVhost, type TestVhost } from '../helpers/rabbit.js';
import { RABBITMQ_MANAGEMENT_URL, uniqueName } from '../helpers/services.js';

const { topology } = declaredTopology(PIPELINE_TOPOLOGY, DEFAULT_RETRY_BUDGET, DEFAULT_RETENTION);

const as = (url: string, user: string, password: string) => {
  const u = new URL(url);
  u.username = encodeURIComponent(user);
  u.password = encodeURIComponent(password);
  return u.toString();
};

/**
 * The broker's pipeline user (what broker-setup creates on Amazon MQ, here on the local broker
 * through its management API, in virtual hosts of this file's own): it publishes and consumes the
 * pipeline's topology and reads its queue depths, and may touch nothing else.
 */
describe('the pipeline broker user', () => {
  let v: TestVhost;
  let other: TestVhost;
  let backend: RabbitMqBackend;
  const credentials = { username: uniqueName('pipeline_user'), password: randomUUID() };

  beforeAll(async () => {
    v = await createTestVhost('broker_users');
    other = await createTestVhost('broker_users_other');
    // the administrator declares the topology, as broker-setup does first
    const admin = rabbitmqBackend({
      url: v.amqpUrl,
      managementUrl: v.managementUrl,
      vhost: v.vhost,
      budget: DEFAULT_RETRY_BUDGET,
      retention: DEFAULT_RETENTION,
      topology: PIPELINE_TOPOLOGY,
      consumer: 'test',
    });
    await admin.prepare('consume');
    await admin.close();
    // someone once gave the same user name rights elsewhere: ensurePipelineUser takes them away
    const u = encodeURIComponent(credentials.username);
    await v.management.request('PUT', `/api/users/${u}`, {
      password: 'old',
      tags: 'administrator',
    });
    await v.management.request('PUT', `/api/permissions/${encodeURIComponent(other.vhost)}/${u}`, {
      configure: '.*',
      write: '.*',
      read: '.*',
    });
    expect(
      await ensurePipelineUser(v.management, { vhost: v.vhost, credentials, topology }),
    ).toEqual({ username: credentials.username, permissions: pipelinePermissions(topology) });
    backend = rabbitmqBackend({
      url: as(v.amqpUrl, credentials.username, credentials.password),
      managementUrl: as(v.managementUrl, credentials.username, credentials.password),
      vhost: v.vhost,
      budget: DEFAULT_RETRY_BUDGET,
      retention: DEFAULT_RETENTION,
      topology: PIPELINE_TOPOLOGY,
      consumer: 'test',
    });
  });
  afterAll(async () => {
    await backend?.close();
    await v?.management
      .request('DELETE', `/api/users/${encodeURIComponent(credentials.username)}`)
      .catch(() => {});
    await other?.delete();
    await v?.delete();
  });

  it('has its tags and one permission set, on the pipeline vhost only', async () => {
    const u = encodeURIComponent(credentials.username);
    expect(await v.management.request('GET', `/api/users/${u}`)).toMatchObject({
      tags: [PIPELINE_USER_TAGS],
    });
    const perms = await v.management.request<{ vhost: string }[]>(
      'GET',
      `/api/users/${u}/permissions`,
    );
    expect(perms?.map((p) => p.vhost)).toEqual([v.vhost]);
  });

  it('declares the topology again, publishes with confirms, consumes, and reads queue depths', async () => {
    await backend.prepare('publish');
    const order = newEnvelope({
      type: 'order.created',
      aggregate: { type: 'order', id: randomUUID(), version: 1 },
      data: {},
      correlationId: 'pipeline-user',
      producer: 'test',
    });
    expect(await backend.publisher('outbox').publish([order])).toEqual([
      expect.objectContaining({ ok: true }),
    ]);
    expect(await backend.inspect()).toMatchObject({ ready: 1 });
    const got = await backend.withChannel(async (ch) => {
      const m = await ch.get(RABBITMQ_NAMES.inventoryQueue, { noAck: false });
      if (m) ch.ack(m);
      // a retry copy and a park go through the inventory's own exchanges
      ch.publish(RETRY_NAMES.parkingExchange, RETRY_NAMES.parkingRoutingKey, Buffer.from('{}'));
      await ch.waitForConfirms();
      return m;
    });
    expect(got && JSON.parse(got.content.toString()).id).toBe(order.id);
    expect(await backend.inspect()).toMatchObject({ ready: 0, parked: 1 });
  });

  it.each([
    [
      'declare an unrelated exchange',
      (ch: amqp.Channel) => ch.assertExchange('unrelated', 'topic'),
    ],
    ['declare an unrelated queue', (ch: amqp.Channel) => ch.assertQueue('unrelated.queue')],
    [
      'publish to amq.topic',
      async (ch: amqp.ConfirmChannel) => {
        // the broker closes the channel; its reason arrives as the channel's error
        const refused = new Promise<never>((_, reject) => ch.once('error', reject));
        ch.publish('amq.topic', 'x', Buffer.from('x'));
        await Promise.race([refused, ch.waitForConfirms().then(() => refused)]);
      },
    ],
    ['delete amq.direct', (ch: amqp.Channel) => ch.deleteExchange('amq.direct')],
  ])('cannot %s', async (_, act) => {
    await expect(backend.withChannel((ch) => act(ch) as Promise<unknown>)).rejects.toThrow(
      /ACCESS_REFUSED|403/,
    );
  });

  it('cannot open another virtual host, nor change policies or users', async () => {
    // the broker closes the connection at `connection.open` (amqplib does not show the reason,
    // "access to vhost refused"); the administrator opens the same vhost
    await (await amqp.connect(other.amqpUrl)).close();
    await expect(
      amqp.connect(as(other.amqpUrl, credentials.username, credentials.password)),
    ).rejects.toThrow(/Expected ConnectionOpenOk; got <ConnectionClose/);
    const mine = new RabbitManagement(
      as(RABBITMQ_MANAGEMENT_URL, credentials.username, credentials.password),
    );
    await expect(
      mine.request('PUT', `/api/policies/${encodeURIComponent(v.vhost)}/takeover`, {
        pattern: '.*',
        definition: { 'max-length': 1 },
      }),
    ).rejects.toThrow(/401|403/);
    await expect(
      mine.request('PUT', '/api/users/intruder', { password: 'x', tags: 'administrator' }),
    ).rejects.toThrow(/401|403/);
    // the management API shows it only its own virtual host
    const vhosts = await mine.request<{ name: string }[]>('GET', '/api/vhosts');
    expect(vhosts?.map((x) => x.name)).toEqual([v.vhost]);
  });

  it('refuses to demote the administrator it runs as', async () => {
    await expect(
      ensurePipelineUser(v.management, {
        vhost: v.vhost,
        credentials: { username: v.management.user, password: 'x' },
        topology,
      }),
    ).rejects.toThrow(/is the administrator/);
  });
});
