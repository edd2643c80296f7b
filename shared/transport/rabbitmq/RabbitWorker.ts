import type { ConfirmChannel, ConsumeMessage } from 'amqplib';
import { ConsumerDriver, type DriverNotices, type ParkRefused } from '../../consumer/driver.js';
import type { Logger } from '../../logger.js';
import type {
  Delivery,
  DeliveryJournal,
  Diagnosis,
  MessageHandler,
  RetryRequest,
  RunningConsumer,
  Settle,
  Settled,
} from '../../port/types.js';
import { backoffDelay, sleep } from '../../util/async.js';
import { RABBITMQ_DEFAULTS } from './constants.js';
import type { AmqpMessage, RabbitCopies } from './copies.js';
import { inboundFromRaw, rawFromAmqp } from './copies.js';
import type { RabbitConnection } from './RabbitConnection.js';

export interface RabbitWorkerOptions {
  queue: string;
  /** Unacknowledged deliveries the broker may push at once (never 0 = unlimited). */
  prefetch?: number;
  /** Deliveries processed in one transaction at most. Default: the prefetch. */
  maxBatch?: number;
  /** Reconnect backoff after giving up on a channel: base·2^(n−1), full jitter, capped. */
  reconnectBaseMs?: number;
  reconnectMaxMs?: number;
  /** Who parks, for diagnoses. */
  consumer: string;
  /** Called when parking refused a copy (the `ParkRefused` metric, deployed). */
  onParkRefused?: ((refused: ParkRefused) => void) | undefined;
}

/** A delivery on a worker channel. */
interface WorkerDelivery extends Delivery {
  msg: ConsumeMessage;
  raw: AmqpMessage;
  ch: ConfirmChannel;
}

/**
 * Worker-mode consumer: manual acks on its own channel, retry and park copies through the
 * backend's confirmed publish primitive (a channel of their own). It maps deliveries in, calls the
 * consumer driver and settles natively:
 * - ack: `basic.ack` (after the use case committed);
 * - retry later: a confirmed, routable copy to the retry exchange, then `basic.ack`;
 * - park: a confirmed copy with its diagnosis to parking, then `basic.ack`; if parking refuses
 *   it, `nack(requeue=false)`: at-least-once dead lettering keeps it in the queue until the
 *   parking route exists again;
 * - give back: nothing more is acked, both channels are closed (the broker redelivers) and the
 *   worker reconnects with a bounded, jittered backoff.
 */
export class RabbitWorker implements RunningConsumer {
  private ch: ConfirmChannel | undefined;
  private consumerTag: string | undefined;
  private buffer: ConsumeMessage[] = [];
  private processing: Promise<void> | undefined;
  private stopping = false;
  private restarting: Promise<void> | undefined;
  private failures = 0;
  /** Times the worker gave up on its channels and reconnected (bounded backoff between them). */
  reconnects = 0;
  readonly stats = { batches: 0, messages: 0, givenBack: 0 };
  private readonly prefetch: number;
  private readonly maxBatch: number;
  private readonly driver: ConsumerDriver<WorkerDelivery>;

  constructor(
    private readonly deps: {
      connection: RabbitConnection;
      copies: RabbitCopies;
      /** Resets the copies' channel after a give-back (its state is unknown). */
      resetCopies: () => Promise<void>;
      handler: MessageHandler;
      journal?: DeliveryJournal | undefined;
      logger?: Logger | undefined;
      notices?: DriverNotices | undefined;
    },
    private readonly options: RabbitWorkerOptions,
  ) {
    this.prefetch = options.prefetch ?? RABBITMQ_DEFAULTS.prefetch;
    if (!Number.isInteger(this.prefetch) || this.prefetch < 1) {
      throw new RangeError(
        `prefetch must be a whole number ≥ 1 (0 would mean unlimited), got ${options.prefetch}`,
      );
    }
    this.maxBatch = options.maxBatch ?? this.prefetch;
    this.driver = new ConsumerDriver(
      {
        handler: deps.handler,
        settle: this.settle,
        journal: deps.journal,
        logger: deps.logger,
        notices: deps.notices,
      },
      { consumer: options.consumer, onParkRefused: options.onParkRefused },
    );
  }

  /** The settle contract on a worker channel. */
  private readonly settle: Settle<WorkerDelivery> = {
    ackMode: 'message',
    ack: async (d) => {
      d.ch.ack(d.msg);
    },
    retryLater: async (d, retry: RetryRequest): Promise<Settled> => {
      const bucket = await this.deps.copies.retry(d.raw, retry); // throws → give back, no ack
      return { state: 'ack', detail: `in ${bucket} ms` };
    },
    park: async (d, diagnosis: Diagnosis): Promise<Settled> => {
      try {
        await this.deps.copies.park(d.raw, diagnosis);
        return { state: 'ack' };
      } catch (err) {
        // Parking refused the copy: let the broker dead-letter the original (at-least-once keeps
        // it in the queue until the parking route exists again). Nothing is lost.
        d.ch.nack(d.msg, false, false);
        return { state: 'dead-lettered', detail: (err as Error).message };
      }
    },
    giveBack: async (deliveries, cause) => {
      const ch = deliveries[0]?.ch ?? this.ch;
      if (ch) await this.giveUp(ch, cause);
    },
  };

  async start(): Promise<void> {
    this.stopping = false;
    const ch = await this.deps.connection.openChannel(10_000);
    await ch.prefetch(this.prefetch);
    ch.on('close', () => {
      if (this.ch !== ch) return;
      this.ch = undefined;
      this.consumerTag = undefined;
      this.buffer = []; // unacked deliveries return to the queue with the channel
      if (!this.stopping) void this.restart('channel closed');
    });
    this.ch = ch;
    const { consumerTag } = await ch.consume(
      this.options.queue,
      (msg) => this.onDelivery(ch, msg),
      { noAck: false },
    );
    this.consumerTag = consumerTag;
    this.failures = 0;
  }

  private onDelivery(ch: ConfirmChannel, msg: ConsumeMessage | null): void {
    if (!msg) {
      // The broker cancelled the consumer (queue deleted): declare the topology again and start
      // again, with backoff.
      this.deps.connection.redeclare();
      if (!this.stopping) void this.restart('consumer cancelled by the broker');
      return;
    }
    if (ch !== this.ch) return;
    this.buffer.push(msg);
    this.processing ??= this.drain().finally(() => {
      this.processing = undefined;
    });
  }

  private async drain(): Promise<void> {
    while (this.buffer.length > 0 && this.ch) {
      const ch = this.ch;
      const batch = this.buffer.splice(0, this.maxBatch).map((msg): WorkerDelivery => {
        const raw = rawFromAmqp(msg);
        const message = inboundFromRaw(raw, msg.fields.redelivered, {
          queue: this.options.queue,
          exchange: msg.fields.exchange,
          routingKey: msg.fields.routingKey,
        });
        return { msg, raw, ch, message };
      });
      this.stats.batches++;
      this.stats.messages += batch.length;
      try {
        await this.driver.deliver(batch);
      } catch (err) {
        // A bug or a broken channel while acking: give the channel up, the broker redelivers.
        await this.giveUp(ch, err);
      }
    }
  }

  private async giveUp(ch: ConfirmChannel, err: unknown): Promise<void> {
    this.stats.givenBack++;
    this.buffer = [];
    if (this.ch === ch) this.ch = undefined;
    this.consumerTag = undefined;
    await Promise.all([ch.close().catch(() => {}), this.deps.resetCopies()]);
    if (!this.stopping) await this.restart((err as Error).message);
  }

  private restart(why: string): Promise<void> {
    this.restarting ??= (async () => {
      while (!this.stopping) {
        this.failures++;
        this.reconnects++;
        const delay = backoffDelay(
          this.failures,
          this.options.reconnectBaseMs ?? RABBITMQ_DEFAULTS.reconnectBaseMs,
          this.options.reconnectMaxMs ?? RABBITMQ_DEFAULTS.reconnectMaxMs,
        );
        this.deps.logger?.info('consumer reconnecting', {
          why,
          attempt: this.failures,
          delayMs: delay,
        });
        await sleep(delay);
        if (this.stopping) return;
        try {
          await this.start();
          return;
        } catch (err) {
          why = (err as Error).message;
        }
      }
    })().finally(() => {
      this.restarting = undefined;
    });
    return this.restarting;
  }

  /** Stops consuming, finishes the batch in flight (acks included), then closes the channel. */
  async stop(): Promise<void> {
    this.stopping = true;
    const ch = this.ch;
    if (ch && this.consumerTag) await ch.cancel(this.consumerTag).catch(() => {});
    await this.processing;
    await this.restarting;
    this.ch = undefined;
    this.buffer = [];
    await ch?.close().catch(() => {});
    await this.deps.resetCopies();
  }
}
