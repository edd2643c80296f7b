import {
  CreateTopicCommand,
  ListTopicsCommand,
  type SNSClient,
  SubscribeCommand,
} from '@aws-sdk/client-sns';
import {
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  SetQueueAttributesCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { DEFAULT_REDRIVE_LIMIT } from '../../config/env.js';
import { ConsumerDriver } from '../../consumer/driver.js';
import { TransportUnavailableError } from '../../port/errors.js';
import {
  type Backend,
  type Capabilities,
  type DeliveryJournal,
  type Inspection,
  type MessageHandler,
  type ParkingLot,
  type ParkNotices,
  type PrepareReport,
  type Publisher,
  type RunningConsumer,
  type Stream,
  subscriptionOf,
} from '../../port/types.js';
import { createSnsClient, createSqsClient } from './client.js';
import type { SqsBackendConfig } from './config.js';
import {
  SQS_DEFAULTS,
  type SqsRetryMode,
  snsFilterPolicy,
  snsTopicName,
  sqsQueueNames,
} from './constants.js';
import { sqsParkingLot } from './parking.js';
import { defaultSqsQueueSettings, ensureQueue, ensureSqsQueues } from './queues.js';
import { SnsPublisher } from './SnsPublisher.js';
import { LazyPublisher, SqsPublisher } from './SqsPublisher.js';
import { type SqsDelivery, SqsSettle } from './SqsSettle.js';

/** The queues of the SQS pipeline, resolved. */
export interface SqsPipelineQueues {
  sourceUrl: string;
  sourceArn: string;
  parkingUrl: string;
  parkingArn: string;
  /** Where the relay sends inventory results (from inventory_outbox). */
  resultsUrl: string;
}

/** What the SQS backend can do on a standard or a FIFO queue. */
export const sqsCapabilities = (fifo: boolean): Capabilities => ({
  orderedPerKey: fifo,
  perMessageDelay: true,
  partialBatchResponse: true,
  // a receive after the first (ApproximateReceiveCount > 1)
  redeliveryFlag: true,
  // a standard queue delivers at least once by design; FIFO's exactly-once processing does not
  spontaneousDuplicates: !fifo,
  brokerParking: true,
  publishDeduplication: fifo,
  consumeModes: ['lambda'],
});

/**
 * The SQS backend, composed from configuration: the client, the queues (source with its
 * RedrivePolicy to parking, parking, results), publishers, the consumer side behind the Lambda
 * SQS trigger, the parking lot and `inspect()`.
 */
export class SqsBackend implements Backend {
  readonly transport = 'sqs';
  readonly capabilities: Capabilities;
  readonly client: SQSClient;
  private readonly ownsClient: boolean;
  private resolved: Promise<SqsPipelineQueues> | undefined;
  private readonly publishers = new Map<string, Publisher>();
  private snsClient: SNSClient | undefined;
  private readonly topics = new Map<Stream, string>();

  constructor(readonly config: SqsBackendConfig) {
    this.capabilities = sqsCapabilities(config.fifo ?? false);
    this.ownsClient = !config.client;
    this.client =
      config.client ??
      createSqsClient({
        endpoint: config.endpoint,
        region: config.region,
        ...(config.requestTimeoutMs ? { requestTimeoutMs: config.requestTimeoutMs } : {}),
        ...(config.maxAttempts ? { maxAttempts: config.maxAttempts } : {}),
      });
  }

  get fifo(): boolean {
    return this.config.fifo ?? false;
  }

  /** The streams published through an SNS topic (`fanOut`, or the deployed topics' streams). */
  get fanOut(): ReadonlySet<Stream> {
    return new Set([...(this.config.fanOut ?? []), ...Object.keys(this.config.topicArns ?? {})]);
  }

  private get sns(): SNSClient {
    this.snsClient ??=
      this.config.snsClient ??
      createSnsClient({
        endpoint: this.config.endpoint,
        region: this.config.region,
        ...(this.config.requestTimeoutMs ? { requestTimeoutMs: this.config.requestTimeoutMs } : {}),
        ...(this.config.maxAttempts ? { maxAttempts: this.config.maxAttempts } : {}),
      });
    return this.snsClient;
  }

  /** A fan-out stream's topic is FIFO when the backend is and FIFO queues read the stream. */
  private topicName(stream: Stream): { name: string; fifo: boolean } {
    const destination = this.config.topology.streams[stream];
    if (destination === undefined) throw new Error(`no stream "${stream}" in the topology`);
    const fifo = this.fifo && stream === this.names().sourceStream;
    return { name: snsTopicName(destination, this.config.prefix ?? '', fifo), fifo };
  }

  /** A fan-out stream's topic ARN: as deployed, as prepared, or looked up by name. */
  async topicArn(stream: Stream): Promise<string> {
    const known = this.config.topicArns?.[stream] ?? this.topics.get(stream);
    if (known) return known;
    const { name } = this.topicName(stream);
    let NextToken: string | undefined;
    do {
      const page = await this.sns.send(new ListTopicsCommand({ NextToken }));
      const found = page.Topics?.find((t) => t.TopicArn?.endsWith(`:${name}`))?.TopicArn;
      if (found) {
        this.topics.set(stream, found);
        return found;
      }
      NextToken = page.NextToken;
    } while (NextToken);
    throw Object.assign(new Error(`no SNS topic ${name} for stream "${stream}"`), {
      name: 'NotFound',
    });
  }

  /**
   * Creates the fan-out streams' topics and subscribes each of this topology's queues on such a
   * stream to its topic: raw message delivery (the body and attributes as published), the
   * subscription's event types as a filter policy where they can be written as one, and a queue
   * policy that lets the topic send.
   */
  private async prepareFanOut(queues: { url: string; stream: Stream; types: readonly string[] }[]) {
    for (const stream of this.fanOut) {
      const { name, fifo } = this.topicName(stream);
      const { TopicArn } = await this.sns.send(
        new CreateTopicCommand({
          Name: name,
          ...(fifo ? { Attributes: { FifoTopic: 'true' } } : {}),
        }),
      );
      this.topics.set(stream, TopicArn as string);
    }
    for (const q of queues.filter((q) => this.fanOut.has(q.stream))) {
      const topicArn = this.topics.get(q.stream) as string;
      const queueArn = (
        await this.client.send(
          new GetQueueAttributesCommand({ QueueUrl: q.url, AttributeNames: ['QueueArn'] }),
        )
      ).Attributes?.QueueArn as string;
      await this.client.send(
        new SetQueueAttributesCommand({
          QueueUrl: q.url,
          Attributes: {
            Policy: JSON.stringify({
              Version: '2012-10-17',
              Statement: [
                {
                  Effect: 'Allow',
                  Principal: { Service: 'sns.amazonaws.com' },
                  Action: 'sqs:SendMessage',
                  Resource: queueArn,
                  Condition: { ArnEquals: { 'aws:SourceArn': topicArn } },
                },
              ],
            }),
          },
        }),
      );
      const filter = snsFilterPolicy(q.types);
      await this.sns.send(
        new SubscribeCommand({
          TopicArn: topicArn,
          Protocol: 'sqs',
          Endpoint: queueArn,
          ReturnSubscriptionArn: true,
          Attributes: {
            RawMessageDelivery: 'true',
            ...(filter ? { FilterPolicy: filter } : {}),
          },
        }),
      );
    }
  }

  private names() {
    return sqsQueueNames(this.config.topology, this.config.prefix ?? '', this.fifo);
  }

  /**
   * Creates (or updates) every queue of the pipeline. Idempotent. A deployed pipeline's queues
   * (`queueUrls` given) are its stack's: nothing is declared.
   */
  async prepare(): Promise<PrepareReport> {
    if (this.config.queueUrls) return { queues: 0, policies: 0 };
    const visibilityTimeoutSeconds =
      this.config.visibilityTimeoutSeconds ?? SQS_DEFAULTS.visibilityTimeoutSeconds;
    const queues = await ensureSqsQueues(this.client, this.names(), this.config.retention, {
      ...defaultSqsQueueSettings(this.config.budget),
      visibilityTimeoutSeconds,
    });
    // read by the order-results function through the same kind of mapping as the source queue:
    // the same visibility timeout (≥ 6 × its timeout), as the stack gives it
    const results = this.names().results;
    const resultsUrl = results
      ? await ensureQueue(this.client, results, {
          VisibilityTimeout: String(visibilityTimeoutSeconds),
        })
      : '';
    const all = { ...queues, resultsUrl };
    this.resolved = Promise.resolve(all);
    const names = this.names();
    const subscription = (name: string | undefined) =>
      name ? this.config.topology.subscriptions[name] : undefined;
    const source = subscription(names.sourceSubscription);
    const resultsSub = subscription(names.resultsSubscription);
    await this.prepareFanOut([
      ...(source ? [{ url: all.sourceUrl, stream: source.stream, types: source.types }] : []),
      ...(resultsSub && resultsUrl
        ? [{ url: resultsUrl, stream: resultsSub.stream, types: resultsSub.types }]
        : []),
    ]);
    return { queues: results ? 3 : 2, policies: 0 };
  }

  /** The queues' URLs and ARNs: as configured, as prepared, or looked up by name. */
  queues(): Promise<SqsPipelineQueues> {
    this.resolved ??= this.lookUp().catch((err: unknown) => {
      this.resolved = undefined;
      throw err;
    });
    return this.resolved;
  }

  private async lookUp(): Promise<SqsPipelineQueues> {
    const names = this.names();
    const given = this.config.queueUrls;
    const url = async (name: string, configured?: string) =>
      configured ??
      ((await this.client.send(new GetQueueUrlCommand({ QueueName: name }))).QueueUrl as string);
    const arn = async (queueUrl: string) =>
      (
        await this.client.send(
          new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
        )
      ).Attributes?.QueueArn as string;
    const sourceUrl = await url(names.source, given?.source);
    const parkingUrl = await url(names.parking, given?.parking);
    const resultsUrl = given
      ? (given.results ?? '')
      : names.results
        ? await url(names.results)
        : '';
    return {
      sourceUrl,
      parkingUrl,
      resultsUrl,
      // Deployed functions are given URLs and need no ARNs: no extra call at cold start.
      sourceArn: given ? '' : await arn(sourceUrl),
      parkingArn: given ? '' : await arn(parkingUrl),
    };
  }

  async ready(timeoutMs = 2_000): Promise<void> {
    await this.publisher().ready(timeoutMs);
  }

  /**
   * The publisher of a stream (default: the retrying subscription's): to its SNS topic when it is
   * a fan-out stream, else to the queue of the subscription that reads it.
   */
  publisher(stream: Stream = this.names().sourceStream): Publisher {
    let p = this.publishers.get(stream);
    if (!p) {
      const names = this.names();
      const toSource = stream === names.sourceStream;
      if (this.fanOut.has(stream)) {
        const { fifo } = this.topicName(stream);
        p = new LazyPublisher(
          async () =>
            new SnsPublisher({ client: this.sns }, { topicArn: await this.topicArn(stream), fifo }),
        );
      } else {
        if (!toSource && stream !== names.resultsStream) {
          throw new Error(`no SQS queue for stream "${stream}" (and it is not a fan-out stream)`);
        }
        p = new LazyPublisher(async () => {
          const q = await this.queues();
          const url = toSource ? q.sourceUrl : q.resultsUrl;
          if (!url) throw new TransportUnavailableError(`no queue URL for stream "${stream}"`);
          return new SqsPublisher(
            { client: this.client },
            { queueUrl: url, fifo: toSource && url.endsWith('.fifo') },
          );
        });
      }
      this.publishers.set(stream, p);
    }
    return p;
  }

  /** The settle contract and consumer driver behind the Lambda SQS trigger. */
  async lambdaDriver(
    handler: MessageHandler,
    options: {
      journal?: DeliveryJournal | undefined;
      /**
       * The subscription (default: the first): the one that retries, with its parking queue, or
       * the one that only gives back (a park there is refused: returned).
       */
      queue?: string;
      /** The use case's notices of parked messages (published through this backend). */
      notices?: ParkNotices | undefined;
    } = {},
  ): Promise<{ driver: ConsumerDriver<SqsDelivery>; mode: SqsRetryMode; fifo: boolean }> {
    const q = await this.queues();
    const chosen = subscriptionOf(this.config.topology, options.queue).name;
    const results = chosen !== this.names().sourceSubscription;
    if (results && !q.resultsUrl) throw new Error('the SQS backend has no results queue URL');
    const sourceUrl = results ? q.resultsUrl : q.sourceUrl;
    const fifo = sourceUrl.endsWith('.fifo');
    const settle = new SqsSettle(
      { client: this.client },
      // The results queue has no parking queue of ours: a park there is refused (returned).
      {
        sourceUrl,
        parkingUrl: results ? '' : q.parkingUrl,
        mode: this.config.mode,
        fifo,
        jitter: this.config.budget.jitter,
      },
    );
    return {
      driver: new ConsumerDriver(
        {
          handler,
          settle,
          journal: options.journal,
          logger: this.config.logger,
          ...(options.notices
            ? {
                notices: {
                  build: options.notices.build,
                  publisher: this.publisher(options.notices.stream),
                },
              }
            : {}),
        },
        { consumer: this.config.consumer, onParkRefused: this.config.onParkRefused },
      ),
      mode: this.config.mode,
      fifo,
    };
  }

  /** SQS's consumer runs behind the Lambda SQS event source only (`lambdaDriver`). */
  async consume(): Promise<RunningConsumer> {
    throw new Error(
      'the SQS backend has no in-process consumer: it runs behind the Lambda SQS event source (lambdaDriver)',
    );
  }

  parkingLot(): ParkingLot {
    const lot = (async () => {
      const q = await this.queues();
      return sqsParkingLot({
        client: this.client,
        sourceUrl: q.sourceUrl,
        parkingUrl: q.parkingUrl,
        ...(q.parkingArn ? { parkingArn: q.parkingArn } : {}),
        redriveLimit: this.config.retention.redriveLimit ?? DEFAULT_REDRIVE_LIMIT,
      });
    })();
    lot.catch(() => {});
    return {
      list: async (limit) => (await lot).list(limit),
      redrive: async (selection, options) => (await lot).redrive(selection, options),
    };
  }

  /**
   * SQS's approximate counts (eventually consistent, about a minute behind on AWS): visible,
   * not visible (in flight, and visibility-mode retries), delayed (resend-mode retries), and the
   * parking queue's visible messages. The age of the oldest message is a CloudWatch metric only.
   */
  async inspect(): Promise<Inspection> {
    const q = await this.queues();
    const attrs = async (url: string) =>
      (
        await this.client.send(
          new GetQueueAttributesCommand({
            QueueUrl: url,
            AttributeNames: [
              'ApproximateNumberOfMessages',
              'ApproximateNumberOfMessagesNotVisible',
              'ApproximateNumberOfMessagesDelayed',
            ],
          }),
        )
      ).Attributes ?? {};
    // A queue that is gone (deleted by an operator, or a lab control) counts as empty.
    const [source, parking] = await Promise.all(
      [q.sourceUrl, q.parkingUrl].map((url) =>
        attrs(url).catch((): Record<string, string> => ({})),
      ),
    );
    const n = (v: string | undefined) => Number(v ?? 0);
    return {
      ready: n(source?.ApproximateNumberOfMessages),
      inFlight: n(source?.ApproximateNumberOfMessagesNotVisible),
      retrying: n(source?.ApproximateNumberOfMessagesDelayed),
      parked: n(parking?.ApproximateNumberOfMessages),
      heldForDeadLettering: 0,
    };
  }

  private closed = false;

  /** Idempotent; a client given in the configuration is left to its owner. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsClient) this.client.destroy();
    if (this.snsClient && !this.config.snsClient) this.snsClient.destroy();
  }
}

/** The SQS backend from its configuration. */
export function sqsBackend(config: SqsBackendConfig): SqsBackend {
  return new SqsBackend(config);
}
