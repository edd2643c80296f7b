import { type JsMsg, jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { waitFor } from '../../devkit/waitFor.js';

/**
 * Pulls from a durable consumer until `done(messages)` holds (or the timeout passes), acking
 * everything read (a work stream then removes it). Returns every message read, duplicates included.
 */
export async function readNatsMessages(
  nc: NatsConnection,
  consumer: { stream: string; name: string },
  done: (messages: JsMsg[]) => boolean,
  timeoutMs = 20_000,
): Promise<JsMsg[]> {
  const c = await jetstream(nc).consumers.get(consumer.stream, consumer.name);
  const subscription = await c.consume({ max_messages: 500 });
  const messages: JsMsg[] = [];
  const reading = (async () => {
    for await (const m of subscription) {
      messages.push(m);
      m.ack();
    }
  })();
  try {
    await waitFor(() => done(messages), {
      timeoutMs,
      message: `messages of ${consumer.name} (read ${messages.length})`,
    });
  } finally {
    await subscription.close();
    await reading;
  }
  return messages;
}
