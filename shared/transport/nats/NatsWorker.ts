import type { Consumer, ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import type { ConsumerDriver } from '../../consumer/driver.js';
import type { Logger } from '../../logger.js';
import type { RunningConsumer } from '../../port/types.js';
import { backoffDelay } from '../../util/async.js';
import { inboundOf } from './messages.js';
import type { NatsDelivery } from './NatsSettle.js';

export interface NatsWorkerOptions {
  /** The consumer's name, as deliveries' origin. */
  queue: string;
  /** Deliveries pulled ahead and held unsettled (never 0); also the largest batch by default. */
  prefetch: number;
  maxBatch: number;
  /** Backoff after a give-back or a lost subscription: base·2^(n−1), jittered, capped. */
  reconnectBaseMs: number;
  reconnectMaxMs: number;
}

/**
 * Worker-mode consumer of one durable pull consumer: a subscription (`consume()`, which pulls ahead
 * up to `prefetch` messages and follows reconnects and heartbeats) feeds a buffer, and batches
 * of it go to the consumer driver, one at a time.
 *
 * A give-back keeps the subscription: the deliveries and what is buffered behind them are nak'd, in
 * stream order, and the next batch waits out a backoff. JetStream delivers them again into the
 * same subscription, counted and flagged. (Ending the subscription first would not do: a message
 * nak'd after its subscription's pull request was gone came back from NATS 2.9 with its delivery count
 * not raised.) A subscription the server ends (the consumer or its stream deleted) starts again after
 * a backoff, the consumer declared again by `open`.
 */
export class NatsWorker implements RunningConsumer {
  readonly stats = { batches: 0, messages: 0, givenBack: 0 };
  /** Subscriptions started again after the server ended one. */
  reconnects = 0;
  private messages: ConsumerMessages | undefined;
  private buffer: JsMsg[] = [];
  private processing: Promise<void> | undefined;
  private running: Promise<void> | undefined;
  private stopping = false;
  /** Give-backs and lost subscriptions in a row: the backoff's exponent. */
  private failures = 0;
  /** Set by a give-back: the next batch waits this long first. */
  private pauseMs = 0;
  private wakeUp: (() => void) | undefined;
  private readonly driver: ConsumerDriver<NatsDelivery>;

  constructor(
    private readonly deps: {
      /** The consumer to pull from, declared again when it is missing. */
      open: () => Promise<Consumer>;
      /** The driver, around a settle that gives deliveries back through `giveBack`. */
      driver: (
        giveBack: (deliveries: readonly NatsDelivery[]) => void,
      ) => ConsumerDriver<NatsDelivery>;
      logger?: Logger | undefined;
    },
    private readonly options: NatsWorkerOptions,
  ) {
    this.driver = deps.driver((deliveries) => this.giveBack(deliveries));
  }

  /** Gives deliveries back, and what is buffered behind them, in stream order; backs off. */
  giveBack(deliveries: readonly NatsDelivery[]): void {
    this.stats.givenBack++;
    for (const d of deliveries) d.msg.nak();
    for (const msg of this.buffer.splice(0)) msg.nak();
    this.pauseMs = this.backoff();
  }

  start(): void {
    this.running = this.run();
  }

  private backoff(): number {
    this.failures++;
    return backoffDelay(this.failures, this.options.reconnectBaseMs, this.options.reconnectMaxMs);
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      let why: string;
      try {
        why = await this.subscribe();
      } catch (err) {
        why = (err as Error).message;
      }
      await this.processing;
      if (this.stopping) return;
      this.reconnects++;
      const delay = this.backoff();
      this.deps.logger?.info('consumer subscribes again', { why, delayMs: delay });
      await this.pause(delay);
    }
  }

  /** One `consume()` subscription, until it ends; resolves with why. */
  private async subscribe(): Promise<string> {
    const consumer = await this.deps.open();
    if (this.stopping) return 'stopping';
    const messages = await consumer.consume({
      max_messages: this.options.prefetch,
      // a deleted consumer or stream ends the subscription (then `open` declares it again)
      abort_on_missing_resource: true,
    });
    this.messages = messages;
    if (this.stopping) void messages.close();
    for await (const msg of messages) {
      this.buffer.push(msg);
      this.processing ??= this.drain().finally(() => {
        this.processing = undefined;
      });
      // Holds the pulls back (the subscription pulls more as it is iterated) while a batch is in work.
      if (this.buffer.length >= this.options.prefetch) await this.processing;
    }
    return 'subscription ended by the server';
  }

  private async drain(): Promise<void> {
    while (this.buffer.length > 0) {
      if (this.pauseMs > 0 && !this.stopping) {
        const ms = this.pauseMs;
        this.pauseMs = 0;
        await this.pause(ms);
        continue;
      }
      const batch = this.buffer.splice(0, this.options.maxBatch).map(
        (msg): NatsDelivery => ({
          msg,
          message: inboundOf(msg, this.options.queue),
          parked: false,
        }),
      );
      this.stats.batches++;
      this.stats.messages += batch.length;
      const given = this.stats.givenBack;
      try {
        await this.driver.deliver(batch);
      } catch (err) {
        // A bug: nothing more is settled; what is not settled yet goes back (a settled
        // message ignores the nak).
        this.deps.logger?.error('consumer batch failed', { error: (err as Error).message });
        this.giveBack(batch);
      }
      if (this.stats.givenBack === given) this.failures = 0;
    }
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wakeUp = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /**
   * Stops pulling and settles what this worker holds (the batch in work and what is buffered)
   * before it resolves.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    void this.messages?.close();
    this.wakeUp?.();
    await this.running;
  }
}
