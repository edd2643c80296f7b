import type { Message } from 'amqplib';
import { describe, expect, it } from 'vitest';
import {
  amazonMqDeliveries,
  type RabbitMQEvent,
  rmqQueueKey,
  toRmqMessage,
} from '../../shared/transport/rabbitmq/index.js';

const amqpMessage = (): Message =>
  ({
    content: Buffer.from('{"hello":"world"}'),
    fields: { deliveryTag: 1, redelivered: false, exchange: 'orders', routingKey: 'order.created' },
    properties: {
      contentType: 'application/json',
      contentEncoding: undefined,
      headers: { 'x-schema-version': '1.0', 'x-retry-attempt': 2, flag: true },
      deliveryMode: 2,
      priority: undefined,
      correlationId: 'corr-1',
      replyTo: undefined,
      expiration: undefined,
      messageId: 'f3c1a2b4-0000-4000-8000-000000000001',
      timestamp: 2021,
      type: 'order.created',
      userId: undefined,
      appId: 'order-service',
      clusterId: undefined,
    },
  }) as unknown as Message;

describe('Amazon MQ (RabbitMQ) event records', () => {
  it('encode like AWS: base64 data, string headers as byte arrays, numbers as numbers, a formatted timestamp', () => {
    const r = toRmqMessage(amqpMessage(), true);
    expect(r.redelivered).toBe(true);
    expect(r.data).toBe(Buffer.from('{"hello":"world"}').toString('base64'));
    expect(r.basicProperties.headers['x-schema-version']).toEqual({ bytes: [49, 46, 48] });
    expect(r.basicProperties.headers['x-retry-attempt']).toBe(2);
    expect(r.basicProperties.timestamp).toBe('Jan 1, 1970, 12:33:41 AM'); // AWS's own example value
    expect(r.basicProperties.bodySize).toBe(17);
    expect(r.basicProperties.priority).toBeNull();
  });

  it('decode back to what the handler needs', () => {
    const event: RabbitMQEvent = {
      eventSource: 'aws:rmq',
      eventSourceArn: 'arn:aws:mq:us-east-1:000000000000:broker:b:b-1',
      rmqMessagesByQueue: {
        [rmqQueueKey('inventory.orders', '/')]: [toRmqMessage(amqpMessage(), false)],
      },
    };
    const deliveries = amazonMqDeliveries(event);
    expect(deliveries).toHaveLength(1);
    const { raw, message } = deliveries[0] as (typeof deliveries)[number];
    expect(raw.content.toString()).toBe('{"hello":"world"}');
    expect(raw.properties).toMatchObject({
      messageId: 'f3c1a2b4-0000-4000-8000-000000000001',
      type: 'order.created',
      correlationId: 'corr-1',
      appId: 'order-service',
      timestamp: 2021,
      headers: { 'x-schema-version': '1.0', 'x-retry-attempt': 2, flag: true },
    });
    // and as the transport port's inbound message
    expect(message).toMatchObject({
      messageId: 'f3c1a2b4-0000-4000-8000-000000000001',
      attempt: 2,
      redelivered: false,
      type: 'order.created',
      schemaVersion: '1.0',
      correlationId: 'corr-1',
    });
  });
});
