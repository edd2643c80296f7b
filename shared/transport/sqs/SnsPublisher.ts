import {
  GetTopicAttributesCommand,
  type MessageAttributeValue,
  PublishBatchCommand,
  type SNSClient,
} from '@aws-sdk/client-sns';
import { type Envelope, encodeEnvelope } from '../../envelope/envelope.js';
import { TransportUnavailableError } from '../../port/errors.js';
import type { Publisher, PublishOutcome } from '../../port/types.js';
import { batchAnswer, envelopeAttributes, fifoIds, publishInBatches } from './SqsPublisher.js';

export interface SnsPublisherOptions {
  topicArn: string;
  /** FIFO topic: MessageGroupId = aggregate id, MessageDeduplicationId = event id. */
  fifo?: boolean;
  /** PublishBatch calls in flight at once. Default 8. */
  concurrency?: number;
  /**
   * How long a route check holds (ms): the topic's confirmed subscriptions are counted at most
   * this often. Default 30 s.
   */
  routeCheckMs?: number;
}

/**
 * Publishes envelopes to an SNS topic with PublishBatch, for a stream several subscribers read
 * (each subscriber's queue is subscribed to the topic with raw message delivery, so it receives
 * the body and the attributes as they were sent: docs/design.md, "Fan-out on SQS").
 *
 * An entry counts only when PublishBatch lists it as successful: the topic accepted it, and SNS
 * then delivers it to every subscribed queue (retrying an SQS endpoint on its own). A topic with
 * no confirmed subscription would accept a message and deliver it nowhere; like RabbitMQ's
 * mandatory flag, such a publish is `unroutable` here (the rows stay in the outbox) instead of
 * accepted.
 */
export class SnsPublisher implements Publisher {
  private routed: { until: number; subscribers: number } | undefined;

  constructor(
    private readonly deps: { client: SNSClient },
    private readonly options: SnsPublisherOptions,
  ) {}

  private async subscribers(timeoutMs?: number): Promise<number> {
    const now = Date.now();
    if (this.routed && this.routed.until > now) return this.routed.subscribers;
    const out = await this.deps.client.send(
      new GetTopicAttributesCommand({ TopicArn: this.options.topicArn }),
      timeoutMs ? { abortSignal: AbortSignal.timeout(timeoutMs) } : {},
    );
    const subscribers = Number(out.Attributes?.SubscriptionsConfirmed ?? 0);
    // a topic nobody reads is checked again at the next publish; a routed one after the period
    this.routed = {
      until: subscribers > 0 ? now + (this.options.routeCheckMs ?? 30_000) : now,
      subscribers,
    };
    return subscribers;
  }

  async ready(timeoutMs = 2_000): Promise<void> {
    try {
      await this.subscribers(timeoutMs);
    } catch (err) {
      throw new TransportUnavailableError(`SNS not reachable: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  async publish(envelopes: readonly Envelope[]): Promise<PublishOutcome[]> {
    if (envelopes.length === 0) return [];
    let subscribers: number;
    try {
      subscribers = await this.subscribers();
    } catch (err) {
      // the same outcome as a failed PublishBatch: its reason from the error
      return publishInBatches(envelopes, 1, () => Promise.reject(err));
    }
    if (subscribers === 0) {
      return envelopes.map((e) => ({
        id: e.id,
        ok: false,
        reason: 'unroutable',
        error: `no confirmed subscription on ${this.options.topicArn}: nobody would receive it`,
      }));
    }
    return publishInBatches(envelopes, this.options.concurrency ?? 8, async (entries) => {
      const out = await this.deps.client.send(
        new PublishBatchCommand({
          TopicArn: this.options.topicArn,
          PublishBatchRequestEntries: entries.map(({ id, envelope: e }) => ({
            Id: id,
            Message: encodeEnvelope(e).toString('utf8'),
            // the same attributes as on a queue: SNS's and SQS's shapes are one
            MessageAttributes: envelopeAttributes(e) as Record<string, MessageAttributeValue>,
            ...fifoIds(e, this.options.fifo),
          })),
        }),
      );
      return batchAnswer(out);
    });
  }

  async close(): Promise<void> {}
}
