import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import {
  RABBITMQ_NAMES,
  RabbitMqBackend,
  SCHEMA_VERSION_HEADER,
} from '../shared/transport/rabbitmq/index.js';
import { SQS_ATTRIBUTES, SqsBackend } from '../shared/transport/sqs/index.js';
import type { Backend } from '../shared/transport/types.js';

/**
 * A message published as it is, not from an envelope: a body that may not parse, identity that
 * may be missing or wrong (poison messages for the lab and the tests).
 */
export interface RawMessage {
  body: Buffer | string;
  messageId?: string;
  type?: string;
  schemaVersion?: string;
  /** RabbitMQ only: the routing key (default: the type, else `order.created`). */
  routingKey?: string;
}

/**
 * Publishes raw messages where the backend's consumer reads them: RabbitMQ to the `orders`
 * exchange (confirmed, persistent, as the relay would), SQS to the source queue (the identity in
 * the attributes the publisher uses). Throws if any of them was not taken.
 */
export async function publishRaw(backend: Backend, messages: RawMessage[]): Promise<void> {
  if (messages.length === 0) return;
  if (backend instanceof RabbitMqBackend) {
    await backend.withChannel(async (ch) => {
      for (const m of messages) {
        ch.publish(
          RABBITMQ_NAMES.ordersExchange,
          m.routingKey ?? m.type ?? 'order.created',
          Buffer.from(m.body),
          {
            persistent: true,
            contentType: 'application/json',
            ...(m.messageId ? { messageId: m.messageId } : {}),
            ...(m.type ? { type: m.type } : {}),
            headers: m.schemaVersion ? { [SCHEMA_VERSION_HEADER]: m.schemaVersion } : {},
          },
        );
      }
      await ch.waitForConfirms();
    });
    return;
  }
  if (backend instanceof SqsBackend) {
    const { sourceUrl } = await backend.queues();
    const fifo = sourceUrl.endsWith('.fifo');
    const attribute = (value: string) => ({ DataType: 'String', StringValue: value });
    for (let i = 0; i < messages.length; i += 10) {
      const out = await backend.client.send(
        new SendMessageBatchCommand({
          QueueUrl: sourceUrl,
          Entries: messages.slice(i, i + 10).map((m, j) => {
            const k = i + j;
            return {
              Id: String(k),
              MessageBody: m.body.toString(),
              MessageAttributes: {
                ...(m.messageId ? { [SQS_ATTRIBUTES.eventId]: attribute(m.messageId) } : {}),
                ...(m.type ? { [SQS_ATTRIBUTES.eventType]: attribute(m.type) } : {}),
                ...(m.schemaVersion
                  ? { [SQS_ATTRIBUTES.schemaVersion]: attribute(m.schemaVersion) }
                  : {}),
              },
              ...(fifo
                ? { MessageGroupId: 'raw', MessageDeduplicationId: `${Date.now()}-${k}` }
                : {}),
            };
          }),
        }),
      );
      if (out.Failed?.length) {
        throw new Error(`raw send failed: ${JSON.stringify(out.Failed)}`);
      }
    }
    return;
  }
  throw new Error(`no raw publish for the ${backend.transport} backend`);
}
