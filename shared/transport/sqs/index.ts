import { GetQueueAttributesCommand, GetQueueUrlCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { z } from 'zod';
import type { Retention, RetryBudget } from '../../config/budget.js';
import { DEFAULT_REDRIVE_LIMIT, type Env } from '../../config/env.js';
import { ConsumerDriver, type ParkRefused } from '../../consumer/driver.js';
import type { Logger } from '../../logger.js';
import { TransportUnavailableError } from '../../port/errors.js';
import type {
  Backend,
  Capabilities,
  DeliveryJournal,
  Inspection,
  MessageHandler,
  ParkingLot,
  ParkNotices,
  PrepareReport,
  Publisher,
  RunningConsumer,
  Stream,
} from '../../port/types.js';
import { backendBaseSchema, type TransportModule, url } from '../module.js';
import { createSqsClient } from './client.js';
import { SQS_DEFAULTS, SQS_NAMES, type SqsRetryMode, sqsQueueNames } from './constants.js';
import { sqsParkingLot } from './parking.js';
import { defaultSqsQueueSettings, ensureQueue, ensureSqsQueues } from './queues.js';
import { SqsPublisher, sqsFailureReason } from './SqsPublisher.js';
import { type SqsDelivery, SqsSettle } from './SqsSettle.js';

export { createSqsClient } from './client.js';
export {
  SQS_ATTRIBUTES,
  SQS_DEFAULTS,
  SQS_DIAGNOSIS,
  SQS_LIMITS,
  SQS_NAMES,
  type SqsRetryMode,
  sqsQueueNames,
} from './constants.js';
export { envelopeAttributes } from './SqsPublisher.js';
export {
  type SqsDelivery,
  SqsGiveBackError,
  SqsSettle,
  sqsDelivery,
  sqsRetryDelaySeconds,
} from './SqsSettle.js';

/** The queues of the SQS pipeline, resolved. */
export interface SqsPipelineQueues {
  sourceUrl: string;
  sourceArn: string;
  parkingUrl: string;
  parkingArn: string;
  /** Where the relay sends inventory results (from inventory_outbox). */
  resultsUrl: string;
}

export interface SqsBackendConfig {
  /** An SQS-compatible endpoint (fauxqs, moto); unset = AWS. */
  endpoint?: string | undefined;
  region: string;
  /** Queue name prefix (tests and labs sharing one server). */
  prefix?: string;
  /** The FIFO variant of the inventory queues (MessageGroupId = aggregate id). */
  fifo?: boolean;
  /** How "retry later" is done. */
  mode: SqsRetryMode;
  budget: RetryBudget;
  retention: Retention;
  /** The source queue's visibility timeout (s), set by `prepare`. */
  visibilityTimeoutSeconds?: number;
  /** Who parks, for diagnoses (`inventory@<version>`). */
  consumer: string;
  /**
   * The queue URLs of a deployed pipeline (no `prepare`). Unset: `prepare` creates the queues,
   * or they are looked up by name.
   */
  queueUrls?: { source: string; parking?: string; results?: string };
  /** A client to use instead of one built from `endpoint` (closed by its owner). */
  client?: SQSClient;
  requestTimeoutMs?: number;
  maxAttempts?: number;
  /** Called when the parking queue refused a consumer's copy (deployed: the `ParkRefused` metric). */
  onParkRefused?: (refused: ParkRefused) => void;
  logger?: Logger;
}

const capabilities = (fifo: boolean): Capabilities => ({
  orderedPerKey: fifo,
  perMessageDelay: true,
  partialBatchResponse: true,
  redeliveryFlag: false,
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

  constructor(readonly config: SqsBackendConfig) {
    this.capabilities = capabilities(config.fifo ?? false);
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

  private names() {
    return sqsQueueNames(this.config.prefix ?? '', this.fifo);
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
    const resultsUrl = await ensureQueue(
      this.client,
      `${this.config.prefix ?? ''}${SQS_NAMES.inventoryResultsQueue}`,
      { VisibilityTimeout: String(visibilityTimeoutSeconds) },
    );
    const all = { ...queues, resultsUrl };
    this.resolved = Promise.resolve(all);
    return { queues: 3, policies: 0 };
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
      : await url(`${this.config.prefix ?? ''}${SQS_NAMES.inventoryResultsQueue}`);
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
    await this.publisher('outbox').ready(timeoutMs);
  }

  /** The publisher of a stream: order events to inventory's queue, results to the order side's. */
  publisher(stream: Stream = 'outbox'): Publisher {
    let p = this.publishers.get(stream);
    if (!p) {
      if (stream !== 'outbox' && stream !== 'inventory_outbox') {
        throw new Error(`no SQS queue for stream "${stream}"`);
      }
      p = new LazySqsPublisher(this.client, async () => {
        const q = await this.queues();
        const url = stream === 'outbox' ? q.sourceUrl : q.resultsUrl;
        if (!url) throw new TransportUnavailableError(`no queue URL for stream "${stream}"`);
        return { queueUrl: url, fifo: stream === 'outbox' && url.endsWith('.fifo') };
      });
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
       * `inventory` (default): the inventory queue, with its retries and parking queue;
       * `results`: the order side's results queue (its handler only acknowledges or gives back).
       */
      queue?: 'inventory' | 'results';
      /** The use case's notices of parked messages (published through this backend). */
      notices?: ParkNotices | undefined;
    } = {},
  ): Promise<{ driver: ConsumerDriver<SqsDelivery>; mode: SqsRetryMode; fifo: boolean }> {
    const q = await this.queues();
    const results = options.queue === 'results';
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
  }
}

/** A publisher whose queue URL is resolved on first use. */
class LazySqsPublisher implements Publisher {
  private inner: Promise<SqsPublisher> | undefined;

  constructor(
    private readonly client: SQSClient,
    private readonly target: () => Promise<{ queueUrl: string; fifo: boolean }>,
  ) {}

  private get(): Promise<SqsPublisher> {
    this.inner ??= this.target()
      .then((t) => new SqsPublisher({ client: this.client }, t))
      .catch((err: unknown) => {
        this.inner = undefined;
        throw err;
      });
    return this.inner;
  }

  async ready(timeoutMs?: number): Promise<void> {
    let p: SqsPublisher;
    try {
      p = await this.get();
    } catch (err) {
      throw new TransportUnavailableError(`SQS not reachable: ${(err as Error).message}`, {
        cause: err,
      });
    }
    await p.ready(timeoutMs);
  }

  async publish(envelopes: Parameters<Publisher['publish']>[0]) {
    let p: SqsPublisher;
    try {
      p = await this.get();
    } catch (err) {
      const error = `SQS queue not resolved: ${(err as Error).message}`;
      const reason = sqsFailureReason(err);
      return envelopes.map((e) => ({ id: e.id, ok: false as const, reason, error }));
    }
    return p.publish(envelopes);
  }

  async close(): Promise<void> {}
}

/** The SQS backend from its configuration. */
export function sqsBackend(config: SqsBackendConfig): SqsBackend {
  return new SqsBackend(config);
}

/**
 * The SQS backend's configuration from the runtime environment: a deployed pipeline's queue
 * URLs when `SOURCE_QUEUE_URL` is set (FIFO when it ends in `.fifo`), else the pinned names with
 * `SQS_QUEUE_PREFIX` on `SQS_ENDPOINT` (unset: AWS).
 */
export function sqsConfigFromEnv(
  env: Env,
  base: Pick<SqsBackendConfig, 'budget' | 'retention' | 'consumer'> & Partial<SqsBackendConfig>,
): SqsBackendConfig {
  const source = env.SOURCE_QUEUE_URL;
  return {
    endpoint: env.SQS_ENDPOINT,
    region: env.AWS_REGION,
    prefix: env.SQS_QUEUE_PREFIX,
    mode: env.SQS_RETRY_MODE,
    visibilityTimeoutSeconds: env.SQS_VISIBILITY_TIMEOUT_S,
    ...(source
      ? {
          fifo: source.endsWith('.fifo'),
          queueUrls: {
            source,
            ...(env.PARKING_QUEUE_URL ? { parking: env.PARKING_QUEUE_URL } : {}),
            ...(env.RESULTS_QUEUE_URL ? { results: env.RESULTS_QUEUE_URL } : {}),
          },
        }
      : {}),
    ...base,
  };
}

const positive = z.number().int().positive();

/** What `SqsBackendConfig` must hold, checked before the backend is built. */
const configSchema = backendBaseSchema.extend({
  endpoint: url().optional(),
  region: z.string().min(1),
  prefix: z.string().optional(),
  fifo: z.boolean().optional(),
  mode: z.enum(['visibility', 'resend']),
  visibilityTimeoutSeconds: z.number().int().min(0).max(43_200).optional(),
  // not checked as URLs: emulators answer hosts a URL parser refuses (`sqs.us-east-1.127.0.0.1`)
  queueUrls: z
    .object({
      source: z.string().min(1),
      parking: z.string().optional(),
      results: z.string().optional(),
    })
    .optional(),
  client: z.custom<SQSClient>((v) => typeof v === 'object' && v !== null).optional(),
  requestTimeoutMs: positive.optional(),
  maxAttempts: positive.optional(),
  onParkRefused: z
    .custom<(refused: ParkRefused) => void>((v) => typeof v === 'function')
    .optional(),
});

/** The SQS backend as a module: a source queue with its redrive policy, behind the Lambda SQS event source. */
export const sqsModule: TransportModule<SqsBackendConfig, SqsBackend> = {
  name: 'sqs',
  description:
    'Amazon SQS (any SQS-compatible server locally): visibility timeout, redrive policy, a parking queue',
  capabilities: capabilities(false),
  capabilitiesOf: (config) => capabilities(config.fifo ?? false),
  configSchema,
  fromEnv: sqsConfigFromEnv,
  create: sqsBackend,
};
