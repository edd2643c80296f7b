import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TcpProxy } from '../../devkit/TcpProxy.js';
import { waitFor } from '../../devkit/waitFor.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import type { Logger, MessageHandler } from '../../shared/index.js';
import { DEFAULT_RETENTION, newEnvelope } from '../../shared/index.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { RabbitConnection, type RabbitMqBackend } from '../../shared/transport/rabbitmq/index.js';
import { rabbitmqBackend } from '../../shared/transport/rabbitmq/RabbitMqBackend.js';
import { amqpUrlVia, createTestVhost, type TestVhost } from '../helpers/rabbit.js';
import { AMQP_URL } from '../helpers/services.js';

const brokerPort = Number(new URL(AMQP_URL).port || 5672);

const order = () => {
  const orderId = randomUUID();
  return newEnvelope({
    type: 'order.created',
    aggregate: { type: 'order', id: orderId, version: 1 },
    data: { orderId, sku: 'SKU-RC', quantity: 1 },
    correlationId: 'reconnect',
    producer: 'order-service',
  });
};

describe('RabbitMQ reconnects (through a TCP proxy)', () => {
  let vhost: TestVhost;
  const backends: RabbitMqBackend[] = [];
  const proxies: TcpProxy[] = [];

  const backendFor = (url: string, reconnect: { baseMs: number; maxMs: number }) => {
    const b = rabbitmqBackend({
      url,
      managementUrl: vhost.managementUrl,
      vhost: vhost.vhost,
      budget: TEST_RETRY_BUDGET,
      retention: DEFAULT_RETENTION,
      topology: PIPELINE_TOPOLOGY,
      consumer: 'reconnect-test',
      reconnect,
      publish: { connectTimeoutMs: 2_000, confirmTimeoutMs: 5_000 },
    });
    backends.push(b);
    return b;
  };
  const proxy = async () => {
    const p = await new TcpProxy('127.0.0.1', brokerPort).start();
    proxies.push(p);
    return p;
  };

  beforeAll(async () => {
    vhost = await createTestVhost('reconnect');
  });
  afterAll(async () => {
    for (const b of backends) await b.close().catch(() => {});
    for (const p of proxies) await p.close();
    await vhost?.delete();
  });

  it('a broker that accepts and then drops every connection: the backoff keeps growing', async () => {
    // Prepare
    const p = await proxy();
    const b = backendFor(amqpUrlVia(p.port, vhost.vhost), { baseMs: 50, maxMs: 10_000 });
    await b.ready(5_000);
    const first = p.attempts.length;

    // Act: every connection is accepted, completes its handshake, and is closed 200 ms later
    p.flap(200);
    await waitFor(() => p.attempts.length >= first + 8, {
      timeoutMs: 40_000,
      message: '8 connection attempts while flapping',
    });

    // Assess: 7 reconnects after 200 ms each with delays 50·2^(k−1) ±20 % take ≥ 6.4 s (amqplib
    // alone starts over at 50 ms after every connect: ~1.8 s, a steady stream of 4 per second)
    const window = p.attempts.slice(first, first + 8);
    const spanMs = (window.at(-1) as number) - (window[0] as number);
    expect(spanMs).toBeGreaterThan(4_000);
    expect(b.connection.connects).toBeGreaterThanOrEqual(2); // they did connect, then were dropped
  }, 60_000);

  it('a connection that stayed up healthyAfterMs resets the backoff; one dropped sooner does not', async () => {
    // Prepare: two connections through flapping proxies, their scheduled delays read from the log
    const delaysOf = async (healthyAfterMs: number) => {
      const p = await proxy();
      const delays: number[] = [];
      const logger = {
        info: (msg: string, data?: { delayMs?: number }) => {
          if (msg === 'amqp reconnect scheduled' && data?.delayMs !== undefined)
            delays.push(data.delayMs);
        },
        warn: () => {},
      } as unknown as Logger;
      const c = new RabbitConnection(
        {
          url: amqpUrlVia(p.port, vhost.vhost),
          initialReconnectDelayMs: 50,
          maxReconnectDelayMs: 10_000,
          healthyAfterMs,
        },
        logger,
      );
      await c.withChannel(async () => {});
      // Act: every connection is dropped 400 ms after it was accepted
      p.flap(400);
      await waitFor(() => delays.length >= 5, { timeoutMs: 30_000, message: '5 reconnects' });
      await c.close();
      return delays.slice(0, 5);
    };

    // Assess: up 400 ms ≥ 100 ms healthy: every delay is the first step (50 ms ±20 %)
    const healthy = await delaysOf(100);
    for (const d of healthy) expect(d).toBeLessThanOrEqual(60);
    // up 400 ms < 30 s: the steps double (50, 100, 200, 400, 800 ±20 %)
    const flapping = await delaysOf(30_000);
    flapping.forEach((d, i) => {
      expect(d).toBeGreaterThanOrEqual(Math.floor(50 * 2 ** i * 0.8));
    });
  }, 60_000);

  it('a queue and an exchange deleted while disconnected: the worker and the publisher declare them again', async () => {
    // Prepare: the topology and its policies, a worker and a publisher through the proxy
    const direct = backendFor(vhost.amqpUrl, { baseMs: 50, maxMs: 500 });
    await direct.prepare('consume');
    const p = await proxy();
    const b = backendFor(amqpUrlVia(p.port, vhost.vhost), { baseMs: 50, maxMs: 500 });
    const seen = new Set<string>();
    const handler: MessageHandler = async (messages) =>
      messages.map((m) => {
        seen.add(m.messageId ?? '');
        return { kind: 'ack', result: 'seen' };
      });
    const worker = await b.consume(handler);
    const publisher = b.publisher('outbox');
    const before = order();
    expect(await publisher.publish([before])).toEqual([{ id: before.id, ok: true }]);
    await waitFor(() => seen.has(before.id), { message: 'consumed before the outage' });

    // Act: disconnected, the queue and the exchange disappear; then the broker is back
    p.cut();
    await direct.withChannel(async (ch) => {
      await ch.deleteQueue(RABBITMQ_NAMES.inventoryQueue);
      await ch.deleteExchange(RABBITMQ_NAMES.ordersExchange);
    });
    p.restore();

    // Assess: publishing works again (the exchange and the binding are back) and the worker
    // consumes from the queue it declared
    const after = order();
    await waitFor(async () => (await publisher.publish([after]))[0]?.ok, {
      timeoutMs: 20_000,
      message: 'a confirmed, routed publish after the reconnect',
    });
    await waitFor(() => seen.has(after.id), {
      timeoutMs: 20_000,
      message: 'consumed after the reconnect',
    });
    const q = await direct.withChannel((ch) => ch.checkQueue(RABBITMQ_NAMES.inventoryQueue));
    expect(q.consumerCount).toBe(1);
    await worker.stop();
  }, 60_000);
});
