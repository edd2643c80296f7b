import {
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
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

/** Where a peer runs: the run's database and the clients of the broker its queue is on. */
type Where = { db: PgDatabase; sqs?: SQSClient; amqpUrl?: string };
type Kind = PeerInput['kind'];
type QueueInput<K extends Kind> = Extract<PeerInput, { kind: K }>;

/** A running peer's queue on its broker (what `PeerSide` does, for one kind of queue). */
abstract class PeerQueue<I extends PeerInput = PeerInput> {
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
const peerQueue = <K extends Kind>(kind: K, input: QueueInput<K>, where: Where) =>
  new PEER_QUEUES[kind](input, where);

/**
 * A peer consumer inside a lab run: started on the run's namespace, fed by our relay (a publisher
 * to the peer's own queue), and observed from the outside: its queue (settled when nothing is
 * visible or in flight), its dead-letter queue (what it parked).
 */
export class PeerSide {
  private running: RunningPeer | undefined;
  private queue: PeerQueue | undefined;

  constructor(
    readonly id: PeerId,
    private readonly where: Where,
  ) {}

  get peer() {
    const p = CONSUMER_PEERS.find((x) => x.id === this.id);
    if (!p) throw new Error(`unknown peer ${this.id}`);
    return p;
  }

  async start(ctx: PeerContext): Promise<void> {
    this.running = await this.peer.start(ctx);
    const { input } = this.running;
    this.queue = peerQueue(input.kind, input, this.where);
  }

  private started(): PeerQueue {
    if (!this.queue) throw new Error(`${this.id} is not started: start the consumer first`);
    return this.queue;
  }

  /**
   * The ids of the bodies sent raw (poison messages): a peer that moves one to its dead-letter
   * queue without its attributes leaves only the body to know it by.
   */
  private readonly sentIds = new Map<string, string>();

  /** Sends bodies to the peer's queue and waits until the broker took them. */
  async send(messages: readonly RawMessage[]): Promise<void> {
    const queue = this.started();
    for (const m of messages) {
      if (m.messageId) this.sentIds.set(Buffer.from(m.body).toString(), m.messageId);
    }
    await queue.send(messages);
  }

  /** What our relay publishes through: each envelope to the peer's queue, confirmed. */
  publisher(): Publisher {
    return {
      publish: async (envelopes: readonly Envelope[]): Promise<PublishOutcome[]> => {
        try {
          await this.started().publish(envelopes);
          return envelopes.map((e) => ({ id: e.id, ok: true }));
        } catch (err) {
          const error = (err as Error).message;
          return envelopes.map((e) => ({ id: e.id, ok: false, reason: 'connection', error }));
        }
      },
      ready: async () => {},
      close: async () => {},
    };
  }

  /** Messages still in the peer's queue: visible, in flight or delayed. */
  async pending(): Promise<number> {
    return this.queue ? this.queue.pending() : 0;
  }

  /**
   * What the peer parked: the messages in its dead-letter queue, read without removing them. None
   * of the peers records a diagnosis with them: the reason is what the queue says (the receive
   * count), nothing more.
   */
  async parked(limit = 100): Promise<ParkedSummary[]> {
    if (!this.running || !this.queue) return [];
    const own = (await this.running.parked?.(this.where.db)) ?? [];
    const setAside = own.map((p) => ({
      messageId: p.messageId,
      reason: p.reason,
      errorClass: 'none recorded',
      error: 'the peer stores no diagnosis with the row it abandoned',
      via: 'its inbox table',
      attempts: p.attempts,
    }));
    return [...setAside, ...(await this.queue.parked(limit, this.sentIds))];
  }

  async close(): Promise<void> {
    await this.running?.stop().catch(() => {});
    await this.queue?.close();
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
