import type { Channel, ConsumeMessage } from 'amqplib';
import type { Context } from 'aws-lambda';
import type { Logger } from '../../shared/logger.js';
import {
  type RabbitMQEvent,
  rmqQueueKey,
  toRmqMessage,
} from '../../shared/transport/rabbitmq/index.js';
import { backoffDelay, sleep } from '../../shared/util/async.js';
import { localLambdaContext } from './lambdaContext.js';

export interface AmazonMqTriggerOptions {
  queue: string;
  vhost: string;
  /** Messages per invocation at most (AWS default 100, max 10,000). */
  batchSize?: number;
  /** How long to gather a batch after its first message (AWS default 500 ms). */
  batchWindowMs?: number;
  /** The function's timeout, for the invocation's `getRemainingTimeInMillis`. */
  functionTimeoutMs?: number;
  eventSourceArn?: string;
  /** The function's name in the invocation's context. */
  functionName?: string;
}

export type RmqHandler = (event: RabbitMQEvent, context: Context) => Promise<unknown>;

/**
 * Local emulation of Lambda's Amazon MQ (RabbitMQ) event source mapping: consumes the queue in
 * batches (size + window), builds the exact `rmqMessagesByQueue` event, invokes the handler with
 * one invocation at a time (AWS runs one concurrent invocation per RabbitMQ mapping), acks the
 * whole batch when the handler returns and requeues the whole batch when it throws.
 *
 * AWS does not document what its mapping does with a batch whose invocation failed; we emulate
 * the behaviour the Amazon MQ guide implies (the broker redelivers the batch) and back off between
 * failed invocations, as Lambda does on errors, instead of redelivering in a hot loop.
 */
export class AmazonMqTrigger {
  private ch: Channel | undefined;
  private pending: ConsumeMessage[] = [];
  private windowTimer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopping = false;
  private consecutiveFailures = 0;
  /** Invocations made (batches) and their messages; failed invocations (the batch went back). */
  readonly stats = { batches: 0, messages: 0, largestBatch: 0, givenBack: 0 };

  constructor(
    private readonly deps: {
      /** Where the event source mapping consumes (the RabbitMQ backend). */
      broker: { openChannel(timeoutMs?: number): Promise<Channel> };
      handler: RmqHandler;
      logger?: Logger | undefined;
    },
    private readonly options: AmazonMqTriggerOptions,
  ) {}

  private get batchSize() {
    return this.options.batchSize ?? 100;
  }

  async start(): Promise<void> {
    this.stopping = false;
    const ch = await this.deps.broker.openChannel(10_000);
    // The mapping never holds more than a batch unacknowledged.
    await ch.prefetch(this.batchSize);
    ch.on('close', () => {
      if (this.ch !== ch) return;
      this.ch = undefined;
      this.pending = [];
      if (!this.stopping) void this.reconnect();
    });
    this.ch = ch;
    await ch.consume(this.options.queue, (msg) => this.onMessage(ch, msg), { noAck: false });
  }

  private async reconnect(): Promise<void> {
    let attempt = 0;
    while (!this.stopping && !this.ch) {
      await sleep(backoffDelay(++attempt, 200, 5_000));
      try {
        await this.start();
      } catch (err) {
        this.deps.logger?.warn('amazon mq trigger: reconnect failed', {
          error: (err as Error).message,
        });
      }
    }
  }

  private onMessage(ch: Channel, msg: ConsumeMessage | null): void {
    if (!msg || ch !== this.ch) return;
    this.pending.push(msg);
    if (this.pending.length >= this.batchSize) {
      this.flushSoon(0);
    } else if (this.pending.length === 1) {
      this.flushSoon(this.options.batchWindowMs ?? 500);
    }
  }

  private flushSoon(delayMs: number): void {
    if (this.windowTimer) clearTimeout(this.windowTimer);
    this.windowTimer = setTimeout(() => {
      this.windowTimer = undefined;
      this.running ??= this.invokeAll().finally(() => {
        this.running = undefined;
        if (this.pending.length > 0 && !this.stopping) this.flushSoon(0);
      });
    }, delayMs);
  }

  private async invokeAll(): Promise<void> {
    while (this.pending.length > 0 && this.ch && !this.stopping) {
      const ch = this.ch;
      const batch = this.pending.splice(0, this.batchSize);
      const event: RabbitMQEvent = {
        eventSource: 'aws:rmq',
        eventSourceArn:
          this.options.eventSourceArn ??
          'arn:aws:mq:local:000000000000:broker:local:b-00000000-0000-0000-0000-000000000000',
        rmqMessagesByQueue: {
          [rmqQueueKey(this.options.queue, this.options.vhost)]: batch.map((m) =>
            toRmqMessage(m, m.fields.redelivered),
          ),
        },
      };
      this.stats.batches++;
      this.stats.messages += batch.length;
      this.stats.largestBatch = Math.max(this.stats.largestBatch, batch.length);
      try {
        await this.deps.handler(
          event,
          localLambdaContext(
            this.options.functionName ?? 'reserve-inventory-rabbitmq',
            this.options.functionTimeoutMs ?? 30_000,
          ),
        );
        this.consecutiveFailures = 0;
        this.settle(() => {
          for (const m of batch) ch.ack(m);
        });
      } catch (err) {
        this.stats.givenBack++;
        this.consecutiveFailures++;
        this.deps.logger?.warn('amazon mq trigger: invocation failed, requeueing the batch', {
          size: batch.length,
          error: (err as Error).message,
        });
        this.settle(() => {
          for (const m of batch) ch.nack(m, false, true);
        });
        await sleep(backoffDelay(this.consecutiveFailures, 500, 10_000));
      }
    }
  }

  /**
   * Acks or nacks a batch on the channel it came on. That channel may have closed during the
   * invocation (a broker restart): amqplib then throws, and the broker has already taken the
   * unsettled deliveries back, as the event source's would be.
   */
  private settle(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.deps.logger?.warn('amazon mq trigger: channel closed before the batch was settled', {
        error: (err as Error).message,
      });
    }
  }

  /** Stops consuming; the invocation in flight finishes and is settled first. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.windowTimer) clearTimeout(this.windowTimer);
    await this.running;
    const ch = this.ch;
    this.ch = undefined;
    this.pending = [];
    await ch?.close().catch(() => {});
  }
}
