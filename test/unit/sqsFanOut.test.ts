import { describe, expect, it } from 'vitest';
import { functionEnvironment } from '../../infra/constructs/index.js';
import { ConfigError, loadEnv } from '../../shared/index.js';
import { snsFilterPolicy } from '../../shared/transport/sqs/constants.js';
import { snsTopicName } from '../../shared/transport/sqs/index.js';

describe('fan-out on SQS: names, filters and settings', () => {
  it("a subscription's event types become an SNS filter policy on event_type where SNS can say them", () => {
    expect(JSON.parse(snsFilterPolicy(['inventory.reserved', 'inventory.released']) ?? '')).toEqual(
      { event_type: ['inventory.reserved', 'inventory.released'] },
    );
    // `prefix.#` is a prefix match (the dot kept, so `inventoryx` is not taken)
    expect(JSON.parse(snsFilterPolicy(['inventory.#', 'order.created']) ?? '')).toEqual({
      event_type: [{ prefix: 'inventory.' }, 'order.created'],
    });
    // what SNS cannot say takes every event of the stream (the handler refuses the others)
    expect(snsFilterPolicy(['#'])).toBeUndefined();
    expect(snsFilterPolicy(['order.*'])).toBeUndefined();
    expect(snsFilterPolicy(['order.#.late'])).toBeUndefined();
    expect(snsFilterPolicy([])).toBeUndefined();
  });

  it("a stream's topic is its destination with the prefix, `.` as `-`, `.fifo` when FIFO", () => {
    expect(snsTopicName('inventory')).toBe('inventory');
    expect(snsTopicName('inventory.events', 'lab-1-', true)).toBe('lab-1-inventory-events.fifo');
  });

  it('STREAM_TOPIC_ARNS and DB_LOGIN_SECRETS round-trip through the environment; a bad pair is refused by name', () => {
    const arns = {
      inventory_outbox: 'arn:aws:sns:eu-west-1:111122223333:inventory',
      shipping_outbox: 'arn:aws:sns:eu-west-1:111122223333:shipping',
    };
    const env = loadEnv({
      ...functionEnvironment({ sqs: { topicArns: arns } }),
      DB_LOGIN_SECRETS: 'shipping_app=arn:aws:secretsmanager:eu-west-1:111122223333:secret:s-1',
    });
    expect(env.STREAM_TOPIC_ARNS).toEqual(arns);
    expect(env.DB_LOGIN_SECRETS).toEqual({
      shipping_app: 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:s-1',
    });
    expect(() => loadEnv({ STREAM_TOPIC_ARNS: 'inventory_outbox' })).toThrow(ConfigError);
    expect(() => loadEnv({ STREAM_TOPIC_ARNS: 'Inventory=arn:x' })).toThrow(
      /STREAM_TOPIC_ARNS.*stream=arn pairs/,
    );
  });
});
