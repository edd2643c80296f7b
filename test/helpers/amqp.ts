import amqp, { type ChannelModel, type ConsumeMessage } from 'amqplib';
import { waitFor } from '../../devkit/waitFor.js';

export interface ReceivedMessage {
  messageId: string;
  type: string | undefined;
  correlationId: string | undefined;
  headers: Record<string, unknown>;
  deliveryMode: number | undefined;
  body: Record<string, unknown>;
}

function toReceived(msg: ConsumeMessage): ReceivedMessage {
  return {
    messageId: msg.properties.messageId as string,
    type: msg.properties.type as string | undefined,
    correlationId: msg.properties.correlationId as string | undefined,
    headers: (msg.properties.headers ?? {}) as Record<string, unknown>,
    deliveryMode: msg.properties.deliveryMode as number | undefined,
    body: JSON.parse(msg.content.toString('utf8')),
  };
}

/** A plain connection for test assertions (no recovery, closed by the test). */
export async function testConnection(url: string): Promise<ChannelModel> {
  return amqp.connect(url);
}

/**
 * Consumes `queue` until `done(messages)` holds (or the timeout passes), acking everything read.
 * Returns every message read, duplicates included.
 */
export async function readMessages(
  conn: ChannelModel,
  queue: string,
  done: (messages: ReceivedMessage[]) => boolean,
  timeoutMs = 20_000,
): Promise<ReceivedMessage[]> {
  const ch = await conn.createChannel();
  const messages: ReceivedMessage[] = [];
  await ch.prefetch(500);
  const { consumerTag } = await ch.consume(queue, (msg) => {
    if (!msg) return;
    messages.push(toReceived(msg));
    ch.ack(msg);
  });
  try {
    await waitFor(() => done(messages), {
      timeoutMs,
      message: `messages in ${queue} (read ${messages.length})`,
    });
  } finally {
    await ch.cancel(consumerTag).catch(() => {});
    await ch.close().catch(() => {});
  }
  return messages;
}

export async function queueDepth(conn: ChannelModel, queue: string): Promise<number> {
  const ch = await conn.createChannel();
  try {
    return (await ch.checkQueue(queue)).messageCount;
  } finally {
    await ch.close().catch(() => {});
  }
}
