import {
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import amqp from 'amqplib';
import type { RawMessage } from '../../devkit/rawMessages.js';
import type { PeerInput } from '../../peers/types.js';
import { type Envelope, encodeEnvelope } from '../../shared/envelope/envelope.js';
import { SCHEMA_VERSION_HEADER } from '../../shared/transport/rabbitmq/constants.js';
import { envelopeAttributes } from '../../shared/transport/sqs/index.js';
import type { ParkedSummary } from '../types.js';

/** The clients of the broker a peer's queue is on. */
type Where = { sqs?: SQSClient | undefined; amqpUrl?: string | undefined };
type Kind = PeerInput['kind'];
type QueueInput<K extends Kind> = Extract<PeerInput, { kind: K }>;

/**
 * A running peer's queue on its broker, observed from the outside: what is still in it (settled
 * when nothing is visible or in flight), and its dead-letter queue (what the peer parked).
 */
export abstract class PeerQueue<I extends PeerInput = PeerInput> {
  constructor(
    protected readonly input: I,
    protected readonly where: Where,
  ) {}
  abstract send(messages: readonly RawMessage[]): Promise<void>;
  /** Throws when the broker did not take every envelope. */
  abstract publish(envelopes: readonly Envelope[]): Promise<void>;
  abstract pending(): Promise<number>;
  abstract parked(limit: number, sentIds: ReadonlyMap<string, string>): Promise<ParkedSummary[]>;
  async close(): Promise<void> {}
}

/** An SQS peer's queue and the dead-letter queue of its redrive policy. */
class SqsPeerQueue extends PeerQueue<QueueInput<'sqs'>> {
  private sqs(): SQSClient {
    if (!this.where.sqs) throw new Error('an SQS peer without an SQS client');
    return this.where.sqs;
  }

  private async sendBatches(
    entries: Omit<SendMessageBatchRequestEntry, 'Id'>[],
    failure: (message: string | undefined) => string,
  ): Promise<void> {
    for (let i = 0; i < entries.length; i += 10) {
      const out = await this.sqs().send(
        new SendMessageBatchCommand({
          QueueUrl: this.input.queueUrl,
          Entries: entries.slice(i, i + 10).map((e, k) => ({ Id: String(k), ...e })),
        }),
      );
      if (out.Failed?.length) throw new Error(failure(out.Failed[0]?.Message));
    }
  }

  send(messages: readonly RawMessage[]): Promise<void> {
    const entries = messages.map((m) => ({
      MessageBody: Buffer.from(m.body).toString(),
      ...(m.messageId
        ? { MessageAttributes: { event_id: { DataType: 'String', StringValue: m.messageId } } }
        : {}),
    }));
    return this.sendBatches(entries, (message) => `send failed: ${message}`);
  }

  publish(envelopes: readonly Envelope[]): Promise<void> {
    const entries = envelopes.map((e) => ({
      MessageBody: encodeEnvelope(e).toString(),
      MessageAttributes: envelopeAttributes(e),
    }));
    return this.sendBatches(entries, (message) => message ?? 'send failed');
  }

  async pending(): Promise<number> {
    const { Attributes = {} } = await this.sqs().send(
      new GetQueueAttributesCommand({
        QueueUrl: this.input.queueUrl,
        AttributeNames: [
          'ApproximateNumberOfMessages',
          'ApproximateNumberOfMessagesNotVisible',
          'ApproximateNumberOfMessagesDelayed',
        ],
      }),
    );
    return Object.values(Attributes).reduce((s, v) => s + Number(v ?? 0), 0);
  }

  async parked(limit: number, sentIds: ReadonlyMap<string, string>): Promise<ParkedSummary[]> {
    if (!this.input.deadLetterQueueUrl) return [];
    const out: ParkedSummary[] = [];
    const seen = new Set<string>();
    for (let round = 0; round < 10 && out.length < limit; round++) {
      const { Messages = [] } = await this.sqs().send(
        new ReceiveMessageCommand({
          QueueUrl: this.input.deadLetterQueueUrl,
          MaxNumberOfMessages: 10,
          VisibilityTimeout: 0,
          WaitTimeSeconds: 0,
          MessageAttributeNames: ['All'],
          MessageSystemAttributeNames: ['All'],
        }),
      );
      const fresh = Messages.filter((m) => m.MessageId && !seen.has(m.MessageId));
      if (fresh.length === 0) break;
      for (const m of fresh) {
        seen.add(m.MessageId as string);
        out.push(
          parkedSummary(
            m.Body,
            m.MessageAttributes?.event_id?.StringValue ?? sentIds.get(m.Body ?? ''),
            'its DLQ (redrive policy)',
            Number(m.Attributes?.ApproximateReceiveCount ?? 0),
          ),
        );
      }
    }
    return out;
  }
}

/** An AMQP peer's exchange, queue and dead-letter queue, over one connection. */
class AmqpPeerQueue extends PeerQueue<QueueInput<'amqp'>> {
  private connection: amqp.ChannelModel | undefined;

  private async withChannel<T>(use: (ch: amqp.ConfirmChannel) => Promise<T>): Promise<T> {
    if (!this.where.amqpUrl) throw new Error('an AMQP peer without an AMQP URL');
    this.connection ??= await amqp.connect(this.where.amqpUrl);
    const ch = await this.connection.createConfirmChannel();
    try {
      return await use(ch);
    } finally {
      await ch.close().catch(() => {});
    }
  }

  send(messages: readonly RawMessage[]): Promise<void> {
    return this.withChannel(async (ch) => {
      for (const m of messages) {
        ch.publish(this.input.exchange, this.input.routingKey, Buffer.from(m.body), {
          persistent: true,
          contentType: 'application/json',
          ...(m.messageId ? { messageId: m.messageId } : {}),
          ...(m.type ? { type: m.type } : {}),
          headers: m.schemaVersion ? { [SCHEMA_VERSION_HEADER]: m.schemaVersion } : {},
        });
      }
      await ch.waitForConfirms();
    });
  }

  publish(envelopes: readonly Envelope[]): Promise<void> {
    return this.send(
      envelopes.map((e) => ({
        body: encodeEnvelope(e),
        messageId: e.id,
        type: e.type,
        schemaVersion: e.schema_version,
      })),
    );
  }

  // ready messages from a passive declare; unacknowledged ones have no cheap count here, so a
  // delivery being handled also counts through the consumer's own journal (see the rig)
  pending(): Promise<number> {
    return this.withChannel(async (ch) => (await ch.checkQueue(this.input.queue)).messageCount);
  }

  async parked(limit: number, sentIds: ReadonlyMap<string, string>): Promise<ParkedSummary[]> {
    const queue = this.input.deadLetterQueue;
    if (!queue) return [];
    return this.withChannel(async (ch) => {
      const got: amqp.GetMessage[] = [];
      for (let i = 0; i < limit; i++) {
        const m = await ch.get(queue, { noAck: false });
        if (!m) break;
        got.push(m);
      }
      const out = got.map((m) => {
        const deaths =
          (m.properties.headers?.['x-death'] as { count?: number }[] | undefined) ?? [];
        return parkedSummary(
          m.content.toString(),
          (m.properties.messageId as string | undefined) ?? sentIds.get(m.content.toString()),
          'its dead-letter queue',
          deaths.reduce((s, d) => s + (d.count ?? 0), 0),
        );
      });
      for (const m of got) ch.nack(m, false, true);
      return out;
    });
  }

  override async close(): Promise<void> {
    await this.connection?.close().catch(() => {});
  }
}

/** The queue class for each kind of peer input. */
type QueueClass<K extends Kind> = new (input: QueueInput<K>, where: Where) => PeerQueue;
const PEER_QUEUES: { [K in Kind]: QueueClass<K> } = { sqs: SqsPeerQueue, amqp: AmqpPeerQueue };

/** The queue of a running peer's input, on the run's broker. */
export const peerQueue = (input: PeerInput, where: Where): PeerQueue =>
  new (PEER_QUEUES[input.kind] as QueueClass<Kind>)(input, where);

function parkedSummary(
  body: string | undefined,
  messageId: string | undefined,
  via: string,
  attempts: number,
): ParkedSummary {
  let id = messageId ?? null;
  if (!id && body) {
    try {
      id = (JSON.parse(body) as { id?: string }).id ?? null;
    } catch {
      // a body that is not JSON: no id to read
    }
  }
  return {
    messageId: id,
    reason: 'dead-lettered',
    errorClass: 'none recorded',
    error: 'the peer stores no diagnosis with a dead-lettered message',
    via,
    attempts,
  };
}
