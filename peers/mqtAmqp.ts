import {
  AbstractAmqpQueueConsumer,
  type AMQPConsumerDependencies,
  type AMQPConsumerOptions,
  AmqpConnectionManager,
  AmqpConsumerErrorResolver,
} from '@message-queue-toolkit/amqp';
import { RedisDeduplicationStore } from './mqtDedupStore.js';
import {
  consumerDependencies,
  type OrderCreatedMessage,
  ToolkitObserver,
  toolkitLogger,
  toolkitOptions,
} from './mqtSqs.js';
import type { PeerConsumer, PeerContext, RunningPeer } from './types.js';

/**
 * AMQP README "Consumers": an `AbstractAmqpQueueConsumer` (direct exchange), written like the
 * package's test consumer (AmqpPermissionConsumer). Two things the toolkit does not do are added
 * where it declares its queue (`createMissingEntities`, run on every (re)connection before it
 * consumes): a prefetch, so that `concurrency` bounds the messages handled at once (the toolkit
 * sets none: unlimited), and the dead-letter queue its `x-dead-letter-*` arguments name.
 */
class OrdersAmqpConsumer extends AbstractAmqpQueueConsumer<OrderCreatedMessage, PeerContext> {
  constructor(
    dependencies: AMQPConsumerDependencies,
    options: AMQPConsumerOptions<OrderCreatedMessage, PeerContext>,
    ctx: PeerContext,
    private readonly extra: { prefetch: number; deadLetterQueue: string },
  ) {
    super(dependencies, options, ctx);
  }

  protected override async createMissingEntities(): Promise<void> {
    await this.channel.prefetch(this.extra.prefetch);
    await this.channel.assertQueue(this.extra.deadLetterQueue, { durable: true });
    await super.createMissingEntities();
  }
}

/** AMQP README "Automatic Reconnects": the connection config, from the run's vhost URL. */
function amqpConfig(url: string) {
  const u = new URL(url);
  return {
    hostname: u.hostname,
    port: Number(u.port || (u.protocol === 'amqps:' ? 5671 : 5672)),
    username: u.username, // kept URL-encoded: the toolkit puts them back into a URL
    password: u.password,
    vhost: u.pathname.slice(1),
    useTls: u.protocol === 'amqps:',
  };
}

export const mqtAmqpPeer: PeerConsumer = {
  id: 'peer-mqt-amqp',
  transport: 'rabbitmq',
  packages: [
    '@message-queue-toolkit/amqp',
    '@message-queue-toolkit/core',
    '@message-queue-toolkit/schemas',
    'amqplib',
    '@redis/client',
  ],
  setup:
    'AMQP README "Consumers": an AbstractAmqpQueueConsumer subclass (as its test consumer ' +
    'AmqpPermissionConsumer: creationConfig queue `<ns>orders`, durable, not auto-deleted, ' +
    'consumed from the default exchange) on an AmqpConnectionManager built from the vhost URL as ' +
    'in "Automatic Reconnects" (amqplib 2.3.1 in place of its ^0.10.8 peer: same promise API); ' +
    'AmqpConsumerErrorResolver; the same schema and field mapping as peer-mqt-sqs; maxRetryDuration ' +
    'at its default (4 days, for `retryLater` results only). Dead letters: the toolkit has none ' +
    '(`deadLetterQueue` throws "not currently supported by the Amqp adapter"), so the queue is ' +
    "declared with RabbitMQ's x-dead-letter-exchange '' / x-dead-letter-routing-key " +
    '`<ns>orders-dlq` and that queue is declared too: the invalid messages the toolkit nacks ' +
    'without requeue land there instead of being dropped. Concurrency: the toolkit has no option ' +
    '(unlimited prefetch); channel.prefetch(concurrency) is set. Deduplication: ' +
    'enableConsumerDeduplication and the same Redis store as peer-mqt-sqs are passed (the option ' +
    'type accepts them), but the AMQP consumer never consults the store (no deduplication step in ' +
    'AbstractAmqpConsumer). Journal from the handler and the MessageMetricsManager dependency.',
  guarantee:
    'At-least-once, no deduplication: a duplicate is handled again. A handler error is nacked ' +
    'with requeue at once and retried without limit ("ToDo we need sanity check to stop trying ' +
    'at some point", AbstractAmqpConsumer), never dead-lettered; a `retryLater` result past ' +
    'maxRetryDuration is acked, i.e. dropped ("ToDo move message to DLQ once it is ' +
    'implemented"); invalid messages are nacked without requeue (dead-lettered here by RabbitMQ).',

  async start(ctx: PeerContext): Promise<RunningPeer> {
    if (!ctx.amqpUrl) throw new Error('peer-mqt-amqp needs an AMQP URL');
    const queue = `${ctx.namespace}orders`;
    const deadLetterQueue = `${ctx.namespace}orders-dlq`;
    const store = await RedisDeduplicationStore.connect(ctx.redisUrl, ctx.namespace);
    const manager = new AmqpConnectionManager(
      amqpConfig(ctx.amqpUrl),
      toolkitLogger('peer-mqt-amqp'),
    );
    // went through the handler: acked after success, or nacked (requeued) after a throw
    const observer = new ToolkitObserver(
      ctx.journal,
      (r) => r.status === 'consumed' || r.status === 'retryLater',
    );
    try {
      await manager.init();
      const consumer = new OrdersAmqpConsumer(
        {
          ...consumerDependencies('peer-mqt-amqp', observer),
          amqpConnectionManager: manager,
          consumerErrorResolver: new AmqpConsumerErrorResolver(),
        },
        {
          ...toolkitOptions(observer, store),
          creationConfig: {
            queueName: queue,
            queueOptions: {
              durable: true,
              autoDelete: false,
              arguments: {
                'x-dead-letter-exchange': '',
                'x-dead-letter-routing-key': deadLetterQueue,
              },
            },
          },
        },
        ctx,
        { prefetch: ctx.concurrency, deadLetterQueue },
      );
      await consumer.start();
    } catch (err) {
      await manager.close();
      await store.close();
      throw err;
    }
    return {
      input: { kind: 'amqp', exchange: '', routingKey: queue, queue, deadLetterQueue },
      async stop() {
        observer.stopping = true; // deliveries from now on stay unacked: requeued at close
        await observer.drain(); // the toolkit acks or nacks each handled message
        await manager.close(); // closes the consumer's channel, then the connection
        await store.close();
      },
    };
  },
};
