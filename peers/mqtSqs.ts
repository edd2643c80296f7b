import {
  MessageHandlerConfigBuilder,
  type MessageMetricsManager,
  type ProcessedMessageMetadata,
  type QueueConsumerDependencies,
  type QueueDependencies,
} from '@message-queue-toolkit/core';
import {
  AbstractSqsConsumer,
  type SQSConsumerDependencies,
  type SQSConsumerOptions,
  SqsConsumerErrorResolver,
} from '@message-queue-toolkit/sqs';
import { z } from 'zod';
import { waitFor } from '../devkit/waitFor.js';
import type { Journal, JournalStep } from '../shared/consumer/journal.js';
import { createLogger } from '../shared/logger.js';
import { RedisDeduplicationStore } from './mqtDedupStore.js';
import type { PeerConsumer, PeerContext, PeerDelivery, RunningPeer } from './types.js';

/*
 * What both message-queue-toolkit peers share (this one and ./mqtAmqp.ts): the schema of our
 * envelope, the field mapping, a logger and the observer that feeds the journal.
 */

/** Our `order.created` envelope as the toolkit's zod schema (unknown fields kept, as ours do). */
const orderCreatedSchema = z.looseObject({
  id: z.uuid(),
  type: z.literal('order.created'),
  occurred_at: z.iso.datetime({ offset: true }),
  data: z.looseObject({
    orderId: z.string().optional(),
    sku: z.string().min(1),
    quantity: z.number().int().positive(),
  }),
});
export type OrderCreatedMessage = z.infer<typeof orderCreatedSchema>;

/**
 * Our envelope's field names, mapped as core's README "Message Schemas" / SQS README "Custom
 * Message Field Names" show (the type field is `messageTypeResolver.messageTypePath` since v25;
 * the deduplication id is the event id).
 */
const ENVELOPE_FIELDS = {
  messageTypeResolver: { messageTypePath: 'type' },
  messageIdField: 'id',
  messageTimestampField: 'occurred_at',
  messageDeduplicationIdField: 'id',
};

/** The pino-shaped logger the toolkit takes, writing through our Powertools logger. */
export function toolkitLogger(service: string): QueueDependencies['logger'] {
  const log = createLogger(service);
  const at =
    (write: (message: string, extra: Record<string, unknown>) => void) =>
    (a: unknown, b?: unknown) =>
      typeof a === 'string'
        ? write(a, {})
        : write(typeof b === 'string' ? b : ((a as { msg?: string } | null)?.msg ?? service), {
            detail: a,
          });
  const logger = {
    level: 'info',
    fatal: at((m, e) => log.critical(m, e)),
    error: at((m, e) => log.error(m, e)),
    warn: at((m, e) => log.warn(m, e)),
    info: at((m, e) => log.info(m, e)),
    debug: at((m, e) => log.debug(m, e)),
    trace: at((m, e) => log.debug(m, e)),
    silent: () => {},
    child: () => logger,
    isLevelEnabled: (level: string) => level !== 'debug' && level !== 'trace',
  };
  return logger as unknown as QueueDependencies['logger'];
}

/** The consumer dependencies besides the transport's: no APM, errors already logged by the toolkit. */
export function consumerDependencies(
  service: string,
  observer: ToolkitObserver,
): QueueDependencies & Omit<QueueConsumerDependencies, 'consumerErrorResolver'> {
  return {
    logger: toolkitLogger(service),
    errorReporter: { report: () => {} },
    transactionObservabilityManager: {
      start: () => {},
      startWithGroup: () => {},
      stop: () => {},
      addCustomAttributes: () => {},
    },
    messageMetricsManager: observer.metrics,
  };
}

/**
 * Watches a toolkit consumer from the two places it lets a user see: the handler (received) and
 * its `MessageMetricsManager`, which it calls once a message is done with (consumed, skipped as a
 * duplicate, given back, or invalid). It journals both and counts the handlers in flight so that
 * `stop` can wait for them. The handler sees only the parsed message: `attempt` is how many times
 * this process's handler got the event.
 */
export class ToolkitObserver {
  /** Set by `stop`: new deliveries are left unhandled (they go back to the queue). */
  stopping = false;
  private readonly attempts = new Map<string, number>();
  private entered = 0;
  private finished = 0;

  /**
   * @param handlerFinished which processing results the toolkit reports for a message that went
   *   through the handler (differs by transport).
   */
  constructor(
    private readonly journal: Journal | undefined,
    private readonly handlerFinished: (r: ProcessedMessageMetadata['processingResult']) => boolean,
  ) {}

  /** In the handler, before the business handler runs. */
  received(id: string): PeerDelivery {
    const attempt = (this.attempts.get(id) ?? 0) + 1;
    this.attempts.set(id, attempt);
    this.entered++;
    this.record('received', id, 'order.created');
    return { messageId: id, attempt };
  }

  readonly metrics: MessageMetricsManager = {
    registerProcessedMessage: (m) => {
      const r = m.processingResult;
      if (this.handlerFinished(r)) this.finished++;
      const id = m.messageId === '(unknown id)' ? null : m.messageId;
      const type = m.messageType ?? null;
      if (r.status === 'consumed')
        this.record(r.skippedAsDuplicate ? 'duplicate' : 'acked', id, type);
      else if (r.status === 'retryLater') this.record('retry-scheduled', id, type, 'retryLater');
      else if (r.status === 'error')
        this.record(
          r.errorReason === 'handlerError' ? 'retry-scheduled' : 'parked',
          id,
          type,
          r.errorReason,
        );
    },
  };

  /** Waits until every handler that started has been reported done by the toolkit. */
  async drain(timeoutMs = 30_000): Promise<void> {
    await waitFor(() => this.finished >= this.entered, {
      timeoutMs,
      intervalMs: 20,
      message: 'in-flight messages to settle',
    }).catch(() => {}); // past the timeout they are abandoned: the broker redelivers them
  }

  private record(step: JournalStep, id: string | null, type: string | null, reason?: string) {
    if (!this.journal) return;
    const attempt = id ? (this.attempts.get(id) ?? 0) : 0;
    this.journal.record({
      step,
      messageId: id,
      eventType: type,
      attempt,
      redelivered: attempt > 1,
      ...(reason ? { reason } : {}),
    });
  }
}

/** A message the handler leaves alone while stopping: never settled, so never acked. */
const LEFT_FOR_REDELIVERY = new Promise<never>(() => {});

/**
 * What both toolkit consumers are given besides their transport's options: our envelope's fields,
 * the handler (journaled by `observer`; it leaves deliveries alone once stopping) and
 * consumer-level deduplication in `store`.
 */
export function toolkitOptions(observer: ToolkitObserver, store: RedisDeduplicationStore) {
  return {
    ...ENVELOPE_FIELDS,
    handlers: new MessageHandlerConfigBuilder<OrderCreatedMessage, PeerContext>()
      .addConfig(orderCreatedSchema, async (message, context) => {
        if (observer.stopping) return LEFT_FOR_REDELIVERY;
        await context.handle(JSON.stringify(message), observer.received(message.id));
        return { result: 'success' };
      })
      .build(),
    enableConsumerDeduplication: true,
    messageDeduplicationConfig: { deduplicationStore: store },
  };
}

// ------------------------------------------------------------------------------------------------

/** SQS README "Standard Queue Consumer": a subclass with its handlers, queue and options. */
class OrdersSqsConsumer extends AbstractSqsConsumer<OrderCreatedMessage, PeerContext> {
  constructor(
    dependencies: SQSConsumerDependencies,
    options: SQSConsumerOptions<OrderCreatedMessage, PeerContext, undefined>,
    ctx: PeerContext,
  ) {
    super(dependencies, options, ctx);
  }

  get urls(): { queueUrl: string; deadLetterQueueUrl: string | undefined } {
    return { queueUrl: this.queueUrl, deadLetterQueueUrl: this.deadLetterQueueUrl };
  }
}

export const mqtSqsPeer: PeerConsumer = {
  id: 'peer-mqt-sqs',
  transport: 'sqs',
  packages: [
    '@message-queue-toolkit/sqs',
    '@message-queue-toolkit/core',
    '@message-queue-toolkit/schemas',
    '@redis/client',
  ],
  setup:
    'AbstractSqsConsumer subclass as in the SQS README "Standard Queue Consumer" (handlers from ' +
    'MessageHandlerConfigBuilder, SqsConsumerErrorResolver, creationConfig creating the queue ' +
    '`<ns>orders` with the queue defaults: 30-s visibility timeout, 20-s long polling by ' +
    'sqs-consumer); "Custom Message Field Names": messageTypeResolver {messageTypePath: type}, ' +
    'messageIdField id, messageTimestampField occurred_at, messageDeduplicationIdField id; "Dead ' +
    'Letter Queue (DLQ)": deadLetterQueue creating `<ns>orders-dlq` with redrivePolicy ' +
    'maxReceiveCount = maxDeliveries; "Message Retry Logic": maxRetryDuration left at its default ' +
    '(4 days; it bounds only `retryLater` results, which this handler never returns: it throws, ' +
    'as the README shows); "Consumer Options": concurrentConsumersAmount = concurrency, ' +
    'consumerOverrides.batchSize = batchSize (at most 10; each consumer handles its batch at ' +
    'once); "Consumer-Level Deduplication": ' +
    'enableConsumerDeduplication with messageDeduplicationConfig.deduplicationStore = ' +
    'peers/mqtDedupStore.ts, a rewrite over @redis/client of ' +
    '@message-queue-toolkit/redis-message-deduplication-store (uninstallable here: it needs ' +
    '@lokalise/node-core ^14.9.1, missing from the registry) with its semantics (SET NX EX, ' +
    'EXISTS, redis-semaphore Mutex), keys prefixed with the namespace; messages carry no ' +
    'deduplicationOptions, so the defaults apply (40-s window, 20-s lock). Journal from the ' +
    'handler and the MessageMetricsManager dependency.',
  guarantee:
    'At-least-once delivery with consumer-level deduplication: "Prevents processing the same ' +
    'message multiple times" (SQS README) for the deduplication window only (default 40 s after ' +
    'the message was processed), the key being stored after the handler succeeded and before the ' +
    'SQS delete; a store error counts as "not duplicated". A thrown handler error leaves the ' +
    'message to reappear after the visibility timeout; "After maxReceiveCount attempts, SQS ' +
    'automatically moves message to DLQ"; invalid messages are sent to the DLQ at once.',

  async start(ctx: PeerContext): Promise<RunningPeer> {
    if (!ctx.sqs) throw new Error('peer-mqt-sqs needs an SQS client');
    const store = await RedisDeduplicationStore.connect(ctx.redisUrl, ctx.namespace);
    // went through the handler: succeeded (not skipped) or threw
    const observer = new ToolkitObserver(
      ctx.journal,
      (r) =>
        (r.status === 'consumed' && !r.skippedAsDuplicate) ||
        (r.status === 'error' && r.errorReason === 'handlerError'),
    );
    const consumer = new OrdersSqsConsumer(
      {
        ...consumerDependencies('peer-mqt-sqs', observer),
        sqsClient: ctx.sqs.client,
        consumerErrorResolver: new SqsConsumerErrorResolver(),
      },
      {
        ...toolkitOptions(observer, store),
        creationConfig: {
          queue: {
            QueueName: `${ctx.namespace}orders`,
            // the run's visibility timeout where it sets one (the lab's scaled time), else SQS's
            ...(ctx.visibilityTimeoutSeconds !== undefined
              ? { Attributes: { VisibilityTimeout: String(ctx.visibilityTimeoutSeconds) } }
              : {}),
          },
        },
        deadLetterQueue: {
          creationConfig: { queue: { QueueName: `${ctx.namespace}orders-dlq` } },
          redrivePolicy: { maxReceiveCount: ctx.maxDeliveries },
        },
        concurrentConsumersAmount: ctx.concurrency,
        consumerOverrides: { batchSize: Math.min(ctx.batchSize, 10) },
      },
      ctx,
    );
    try {
      await consumer.start();
    } catch (err) {
      await store.close();
      throw err;
    }
    const { queueUrl, deadLetterQueueUrl } = consumer.urls;
    return {
      input: { kind: 'sqs', queueUrl, ...(deadLetterQueueUrl ? { deadLetterQueueUrl } : {}) },
      async stop() {
        observer.stopping = true;
        await consumer.close(); // stops polling; a long poll under way still returns its messages
        await observer.drain();
        await store.close();
      },
    };
  },
};
