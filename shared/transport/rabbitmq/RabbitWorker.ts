import type { ConfirmChannel, ConsumeMessage } from 'amqplib';
import type { Journal } from '../../consumer/journal.js';
import type { InboundMessage, Outcome } from '../../consumer/types.js';
import { fault } from '../../faults.js';
import type { Logger } from '../../logger.js';
import { backoffDelay, sleep } from '../../util/async.js';
import type { RabbitConnection } from './RabbitConnection.js';
import { inboundFromRaw, type RabbitSettler, rawFromAmqp } from './RabbitSettler.js';

/** What processes a batch of messages: `ReserveInventory.process`. */
export type BatchProcessor = (messages: readonly InboundMessage[]) => Promise<Outcome[]>;

export interface RabbitWorkerOptions {
  queue: string;
  /** Unacknowledged deliveries the broker may push at once (never 0 = unlimited). Default 16. */
  prefetch?: number;
  /** Deliveries processed in one transaction at most. Default: the prefetch. */
  maxBatch?: number;
  /** Reconnect backoff after giving up on a channel: base·2^(n−1), full jitter, capped. */
  reconnectBaseMs?: number;
  reconnectMaxMs?: number;
}

/**
 * Worker-mode consumer (DESIGN §3, first column): manual acks on its own channel, a separate
 * confirm channel (in the settler) for retry and park copies. For each delivery, exactly one of:
 * - ack after the effect committed;
 * - retry: confirmed, routable copy to the retry exchange, then ack;
 * - park: confirmed copy with diagnosis to parking, then ack; if parking refuses it,
 *   nack(requeue=false): at-least-once dead lettering keeps it in the queue until parking is back;
 * - give up: when a retry copy cannot be published or processing failed unexpectedly, nothing is
 *   acked, both channels are closed (the broker redelivers) and the worker reconnects with a
 *   bounded, jittered backoff.
 */
export class RabbitWorker {
  private ch: ConfirmChannel | undefined;
  private consumerTag: string | undefined;
  private buffer: ConsumeMessage[] = [];
  private processing: Promise<void> | undefined;
  private stopping = false;
  private restarting: Promise<void> | undefined;
  private failures = 0;
  /** Times the worker gave up on its channels and reconnected (bounded backoff between them). */
  reconnects = 0;
  /** Batches handed to the processor, and the messages in them. */
  readonly stats = { batches: 0, messages: 0 };
  private readonly prefetch: number;
  private readonly maxBatch: number;

  constructor(
    private readonly deps: {
      connection: RabbitConnection;
      settler: RabbitSettler;
      process: BatchProcessor;
      journal?: Journal;
      logger?: Logger;
    },
    private readonly options: RabbitWorkerOptions,
  ) {
    this.prefetch = options.prefetch ?? 16;
    if (!Number.isInteger(this.prefetch) || this.prefetch < 1) {
      throw new RangeError(
        `prefetch must be a whole number ≥ 1 (0 would mean unlimited), got ${options.prefetch}`,
      );
    }
    this.maxBatch = options.maxBatch ?? this.prefetch;
  }

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
      {
        noAck: false,
      },
    );
    this.consumerTag = consumerTag;
    this.failures = 0;
  }

  private onDelivery(ch: ConfirmChannel, msg: ConsumeMessage | null): void {
    if (!msg) {
      // The broker cancelled the consumer (queue deleted): start again, with backoff.
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
      const batch = this.buffer.splice(0, this.maxBatch);
      this.stats.batches++;
      this.stats.messages += batch.length;
      try {
        await this.handle(ch, batch);
      } catch (err) {
        await this.giveUp(ch, err);
      }
    }
  }

  private async handle(ch: ConfirmChannel, batch: ConsumeMessage[]): Promise<void> {
    const raws = batch.map(rawFromAmqp);
    const inbound = raws.map((raw, i) =>
      inboundFromRaw(raw, (batch[i] as ConsumeMessage).fields.redelivered),
    );
    const outcomes = await this.deps.process(inbound);
    for (let i = 0; i < batch.length; i++) {
      const msg = batch[i] as ConsumeMessage;
      const raw = raws[i] as (typeof raws)[number];
      const message = inbound[i] as InboundMessage;
      const outcome = outcomes[i] as Outcome;
      if (outcome.kind === 'retry') {
        const bucket = await this.deps.settler.retry(raw, outcome); // throws → give up, no ack
        fault('reserve.after-retry-publish');
        this.deps.journal?.recordMessage(
          'retry-scheduled',
          message,
          outcome.errorClass,
          `${outcome.error} (in ${bucket} ms)`,
        );
      } else if (outcome.kind === 'park') {
        try {
          const d = await this.deps.settler.park(raw, outcome, message.attempt);
          this.deps.journal?.recordMessage('parked', message, outcome.reason, d.error);
        } catch (err) {
          // Parking refused the copy: let the broker dead-letter the original (at-least-once keeps
          // it in inventory.orders until the parking route exists again). Nothing is lost.
          ch.nack(msg, false, false);
          this.deps.journal?.recordMessage(
            'parked',
            message,
            'dead-lettered by the broker',
            (err as Error).message,
          );
          continue;
        }
      }
      ch.ack(msg);
      this.deps.journal?.recordMessage(
        'acked',
        message,
        outcome.kind === 'ack' ? outcome.result : outcome.kind,
      );
    }
  }

  private async giveUp(ch: ConfirmChannel, err: unknown): Promise<void> {
    this.deps.logger?.warn('consumer gives up on its channels; the broker will redeliver', {
      error: (err as Error).message,
    });
    this.deps.journal?.recordMessage('abandoned', undefined, 'redelivery', (err as Error).message);
    this.buffer = [];
    if (this.ch === ch) this.ch = undefined;
    this.consumerTag = undefined;
    await Promise.all([ch.close().catch(() => {}), this.deps.settler.reset()]);
    if (!this.stopping) await this.restart((err as Error).message);
  }

  private restart(why: string): Promise<void> {
    this.restarting ??= (async () => {
      while (!this.stopping) {
        this.failures++;
        this.reconnects++;
        const delay = backoffDelay(
          this.failures,
          this.options.reconnectBaseMs ?? 200,
          this.options.reconnectMaxMs ?? 5_000,
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
    await this.deps.settler.reset();
  }
}
