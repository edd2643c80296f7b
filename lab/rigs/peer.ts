import {
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import amqp from 'amqplib';
import type { RawMessage } from '../../devkit/rawMessages.js';
import { CONSUMER_PEERS } from '../../peers/index.js';
import type { PeerContext, PeerId, PeerInput, RunningPeer } from '../../peers/types.js';
import type { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import { type Envelope, encodeEnvelope } from '../../shared/envelope/envelope.js';
import type { Publisher, PublishOutcome } from '../../shared/port/types.js';
import { SCHEMA_VERSION_HEADER } from '../../shared/transport/rabbitmq/constants.js';
import { envelopeAttributes } from '../../shared/transport/sqs/index.js';
import type { ParkedSummary } from '../types.js';

export { REDIS_URL, redisProblem } from '../../peers/redis.js';

/**
 * A peer consumer inside a lab run: started on the run's namespace, fed by our relay (a publisher
 * to the peer's own queue), and observed from the outside: its queue (settled when nothing is
 * visible or in flight), its dead-letter queue (what it parked).
 */
export class PeerSide {
  private running: RunningPeer | undefined;
  private connection: amqp.ChannelModel | undefined;

  constructor(
    readonly id: PeerId,
    private readonly where: { db: PgDatabase; sqs?: SQSClient; amqpUrl?: string },
  ) {}

  get peer() {
    const p = CONSUMER_PEERS.find((x) => x.id === this.id);
    if (!p) throw new Error(`unknown peer ${this.id}`);
    return p;
  }

  async start(ctx: PeerContext): Promise<void> {
    this.running = await this.peer.start(ctx);
  }

  get input(): PeerInput {
    if (!this.running) throw new Error(`${this.id} is not started: start the consumer first`);
    return this.running.input;
  }

  private async channel(): Promise<amqp.ConfirmChannel> {
    if (!this.where.amqpUrl) throw new Error('an AMQP peer without an AMQP URL');
    this.connection ??= await amqp.connect(this.where.amqpUrl);
    return this.connection.createConfirmChannel();
  }

  private sqs(): SQSClient {
    if (!this.where.sqs) throw new Error('an SQS peer without an SQS client');
    return this.where.sqs;
  }

  /**
   * The ids of the bodies sent raw (poison messages): a peer that moves one to its dead-letter
   * queue without its attributes leaves only the body to know it by.
   */
  private readonly sentIds = new Map<string, string>();

  /** Sends bodies to the peer's queue and waits until the broker took them. */
  async send(messages: readonly RawMessage[]): Promise<void> {
    const input = this.input;
    for (const m of messages) {
      if (m.messageId) this.sentIds.set(Buffer.from(m.body).toString(), m.messageId);
    }
    if (input.kind === 'sqs') {
      for (let i = 0; i < messages.length; i += 10) {
        const out = await this.sqs().send(
          new SendMessageBatchCommand({
            QueueUrl: input.queueUrl,
            Entries: messages.slice(i, i + 10).map((m, k) => ({
              Id: String(k),
              MessageBody: Buffer.from(m.body).toString(),
              ...(m.messageId
                ? {
                    MessageAttributes: {
                      event_id: { DataType: 'String', StringValue: m.messageId },
                    },
                  }
                : {}),
            })),
          }),
        );
        if (out.Failed?.length) throw new Error(`send failed: ${out.Failed[0]?.Message}`);
      }
      return;
    }
    const ch = await this.channel();
    try {
      for (const m of messages) {
        ch.publish(input.exchange, input.routingKey, Buffer.from(m.body), {
          persistent: true,
          contentType: 'application/json',
          ...(m.messageId ? { messageId: m.messageId } : {}),
          ...(m.type ? { type: m.type } : {}),
          headers: m.schemaVersion ? { [SCHEMA_VERSION_HEADER]: m.schemaVersion } : {},
        });
      }
      await ch.waitForConfirms();
    } finally {
      await ch.close().catch(() => {});
    }
  }

  /** What our relay publishes through: each envelope to the peer's queue, confirmed. */
  publisher(): Publisher {
    return {
      publish: async (envelopes: readonly Envelope[]): Promise<PublishOutcome[]> => {
        try {
          if (this.input.kind === 'sqs') {
            const input = this.input;
            for (let i = 0; i < envelopes.length; i += 10) {
              const chunk = envelopes.slice(i, i + 10);
              const out = await this.sqs().send(
                new SendMessageBatchCommand({
                  QueueUrl: input.queueUrl,
                  Entries: chunk.map((e, k) => ({
                    Id: String(k),
                    MessageBody: encodeEnvelope(e).toString(),
                    MessageAttributes: envelopeAttributes(e),
                  })),
                }),
              );
              if (out.Failed?.length) throw new Error(out.Failed[0]?.Message ?? 'send failed');
            }
          } else {
            await this.send(
              envelopes.map((e) => ({
                body: encodeEnvelope(e),
                messageId: e.id,
                type: e.type,
                schemaVersion: e.schema_version,
              })),
            );
          }
          return envelopes.map((e) => ({ id: e.id, ok: true }));
        } catch (err) {
          return envelopes.map((e) => ({
            id: e.id,
            ok: false,
            reason: 'connection',
            error: (err as Error).message,
          }));
        }
      },
      ready: async () => {},
      close: async () => {},
    };
  }

  /** Messages still in the peer's queue: visible, in flight or delayed. */
  async pending(): Promise<number> {
    if (!this.running) return 0;
    const input = this.input;
    if (input.kind === 'sqs') {
      const { Attributes = {} } = await this.sqs().send(
        new GetQueueAttributesCommand({
          QueueUrl: input.queueUrl,
          AttributeNames: [
            'ApproximateNumberOfMessages',
            'ApproximateNumberOfMessagesNotVisible',
            'ApproximateNumberOfMessagesDelayed',
          ],
        }),
      );
      return Object.values(Attributes).reduce((s, v) => s + Number(v ?? 0), 0);
    }
    // AMQP: ready messages from a passive declare; unacknowledged ones have no cheap count here,
    // so a delivery being handled also counts through the consumer's own journal (see the rig)
    const ch = await this.channel();
    try {
      const q = await ch.checkQueue(input.queue);
      return q.messageCount;
    } finally {
      await ch.close().catch(() => {});
    }
  }

  /**
   * What the peer parked: the messages in its dead-letter queue, read without removing them. None
   * of the peers records a diagnosis with them: the reason is what the queue says (the receive
   * count), nothing more.
   */
  async parked(limit = 100): Promise<ParkedSummary[]> {
    if (!this.running) return [];
    const own = (await this.running.parked?.(this.where.db)) ?? [];
    const setAside = own.map((p) => ({
      messageId: p.messageId,
      reason: p.reason,
      errorClass: 'none recorded',
      error: 'the peer stores no diagnosis with the row it abandoned',
      via: 'its inbox table',
      attempts: p.attempts,
    }));
    return [...setAside, ...(await this.brokerParked(limit))];
  }

  private async brokerParked(limit: number): Promise<ParkedSummary[]> {
    const input = this.input;
    if (input.kind === 'sqs') {
      if (!input.deadLetterQueueUrl) return [];
      const out: ParkedSummary[] = [];
      const seen = new Set<string>();
      for (let round = 0; round < 10 && out.length < limit; round++) {
        const { Messages = [] } = await this.sqs().send(
          new ReceiveMessageCommand({
            QueueUrl: input.deadLetterQueueUrl,
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
              m.MessageAttributes?.event_id?.StringValue ?? this.sentIds.get(m.Body ?? ''),
              'its DLQ (redrive policy)',
              Number(m.Attributes?.ApproximateReceiveCount ?? 0),
            ),
          );
        }
      }
      return out;
    }
    if (!input.deadLetterQueue) return [];
    const ch = await this.channel();
    try {
      const got: amqp.GetMessage[] = [];
      for (let i = 0; i < limit; i++) {
        const m = await ch.get(input.deadLetterQueue, { noAck: false });
        if (!m) break;
        got.push(m);
      }
      const out = got.map((m) => {
        const deaths =
          (m.properties.headers?.['x-death'] as { count?: number }[] | undefined) ?? [];
        return parkedSummary(
          m.content.toString(),
          (m.properties.messageId as string | undefined) ?? this.sentIds.get(m.content.toString()),
          'its dead-letter queue',
          deaths.reduce((s, d) => s + (d.count ?? 0), 0),
        );
      });
      for (const m of got) ch.nack(m, false, true);
      return out;
    } finally {
      await ch.close().catch(() => {});
    }
  }

  async close(): Promise<void> {
    await this.running?.stop().catch(() => {});
    await this.connection?.close().catch(() => {});
  }
}

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
