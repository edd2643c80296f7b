import { type MessageAttributeValue, SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import type { Backend } from '../shared/port/types.js';
import { RABBITMQ_NAMES, SCHEMA_VERSION_HEADER } from '../shared/transport/rabbitmq/constants.js';
import { RabbitMqBackend } from '../shared/transport/rabbitmq/index.js';
import { SQS_ATTRIBUTES, SQS_LIMITS } from '../shared/transport/sqs/constants.js';
import { SqsBackend } from '../shared/transport/sqs/index.js';

/**
 * A message put on the transport as it is, bypassing the outbox and the publisher: poison
 * messages (a body that is not JSON, an envelope missing fields), or envelopes the relay did not
 * write.
 */
export interface RawMessage {
  body: Buffer | string;
  /** The transport's message id (AMQP `message_id`, SQS `event_id`); none when unset. */
  messageId?: string;
  /** The event type (AMQP `type`, SQS `event_type`). */
  type?: string;
  /** The envelope schema version (header or attribute). */
  schemaVersion?: string;
  /** RabbitMQ only. Default: the type, else `order.created`. */
  routingKey?: string;
}

/**
 * Publishes messages as they are where the relay publishes order events, and waits until the
 * broker took them: RabbitMQ, to the `orders` exchange on a confirm channel (the confirms
 * awaited); SQS, to the source queue in batches (a failed entry throws). The lab and the tests
 * use it for poison messages.
 */
export async function publishRaw(backend: Backend, messages: readonly RawMessage[]): Promise<void> {
  if (backend instanceof RabbitMqBackend) return publishRawRabbit(backend, messages);
  if (backend instanceof SqsBackend) return publishRawSqs(backend, messages);
  throw new Error(`no raw publish on the ${backend.transport} backend`);
}

async function publishRawRabbit(
  backend: RabbitMqBackend,
  messages: readonly RawMessage[],
): Promise<void> {
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
}

async function publishRawSqs(backend: SqsBackend, messages: readonly RawMessage[]): Promise<void> {
  const { sourceUrl } = await backend.queues();
  const str = (v: string): MessageAttributeValue => ({ DataType: 'String', StringValue: v });
  const entries = messages.map((m, k) => ({
    Id: String(k),
    MessageBody: m.body.toString(),
    MessageAttributes: {
      ...(m.messageId ? { [SQS_ATTRIBUTES.eventId]: str(m.messageId) } : {}),
      ...(m.type ? { [SQS_ATTRIBUTES.eventType]: str(m.type) } : {}),
      ...(m.schemaVersion ? { [SQS_ATTRIBUTES.schemaVersion]: str(m.schemaVersion) } : {}),
    },
    ...(backend.fifo
      ? { MessageGroupId: 'raw', MessageDeduplicationId: `${Date.now()}-${k}` }
      : {}),
  }));
  for (let i = 0; i < entries.length; i += SQS_LIMITS.batchEntries) {
    const out = await backend.client.send(
      new SendMessageBatchCommand({
        QueueUrl: sourceUrl,
        Entries: entries.slice(i, i + SQS_LIMITS.batchEntries),
      }),
    );
    if (out.Failed?.length) throw new Error(`send failed: ${JSON.stringify(out.Failed)}`);
  }
}
