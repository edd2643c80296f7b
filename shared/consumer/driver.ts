import { type FaultPoint, fault } from '../config/faults.js';
import type { Logger } from '../logger.js';
import type {
  Delivery,
  DeliveryJournal,
  Diagnosis,
  InboundMessage,
  MessageHandler,
  Outcome,
  ParkNotices,
  ParkOutcome,
  Publisher,
  Settle,
  Settled,
} from '../port/types.js';
import { shortError } from './classify.js';
import { peekEnvelope } from './peek.js';

/** What one batch came to. */
export interface BatchReport {
  messages: number;
  /** Done for good: acknowledged, or settled by a confirmed retry or park copy. */
  acked: number;
  retried: number;
  parked: number;
  /** Coming back later on their own (SQS visibility retries, a park the broker dead-letters). */
  returned: number;
}

export interface ConsumerDriverOptions {
  /** Who parked a message, for its diagnosis (`inventory@<version>`). */
  consumer: string;
  /** The fault point between a confirmed retry copy and the original's settlement. */
  retryFaultPoint?: FaultPoint;
  /** Clock for diagnoses (tests). */
  now?: () => Date;
  /**
   * Called when a park was refused: the parking copy was not confirmed (RabbitMQ: then the broker
   * dead-letters the original, or the Amazon MQ batch goes back; SQS: the record comes back).
   * Deployed functions publish the `ParkRefused` metric from it.
   */
  onParkRefused?: ((refused: ParkRefused) => void) | undefined;
}

/** A park the backend could not make. */
export interface ParkRefused {
  messageId: string | null;
  /** What became of the delivery: dead-lettered by the broker, returned, or given back. */
  fate: 'dead-lettered' | 'returned' | 'given-back';
  error: string;
}

/** The park notices of a use case with the publisher they go through (see `ParkNotices`). */
export interface DriverNotices {
  build: ParkNotices['build'];
  publisher: Publisher;
}

const DIAGNOSIS_ERROR_MAX = 256;

/**
 * The one consuming driver: every backend's consumer (RabbitMQ worker, the Amazon MQ and SQS
 * Lambda handlers, the in-memory backend) maps its native input to deliveries and calls this.
 * It owns what must be the same everywhere:
 * - running the use case on the batch;
 * - settling each outcome through the backend's `Settle`: ack, retry later (then the fault point
 *   `reserve.after-retry-publish`), park with a diagnosis built here;
 * - the journal lines `retry-scheduled`, `parked`, `acked`, `abandoned` (the use case writes
 *   `received`, `duplicate`, `effect-committed`, `deferred`);
 * - the give-back rule: the whole batch goes back when the use case throws, or when its
 *   infrastructure failed and the backend gives back on that; from a settle that fails on, every
 *   delivery not yet settled goes back. Nothing is acknowledged that was not settled.
 */
export class ConsumerDriver<D extends Delivery> {
  private readonly retryFaultPoint: FaultPoint;
  private readonly now: () => Date;

  constructor(
    private readonly deps: {
      handler: MessageHandler;
      settle: Settle<D>;
      journal?: DeliveryJournal | undefined;
      logger?: Logger | undefined;
      /** Announces parked messages (none: nobody is told). */
      notices?: DriverNotices | undefined;
    },
    private readonly options: ConsumerDriverOptions,
  ) {
    this.retryFaultPoint = options.retryFaultPoint ?? 'reserve.after-retry-publish';
    this.now = options.now ?? (() => new Date());
  }

  /** Decides and settles a batch, in order. */
  async deliver(batch: readonly D[]): Promise<BatchReport> {
    const report: BatchReport = {
      messages: batch.length,
      acked: 0,
      retried: 0,
      parked: 0,
      returned: 0,
    };
    if (batch.length === 0) return report;
    const outcomes = await this.decide(batch);
    if (!outcomes) {
      report.returned = batch.length;
      return report;
    }
    for (let i = 0; i < batch.length; i++) {
      const delivery = batch[i] as D;
      const outcome = outcomes[i] as Outcome;
      let settled: Settled;
      try {
        settled = await this.settleOne(delivery, outcome);
      } catch (err) {
        await this.giveBack(batch.slice(i), unsettled(delivery, err));
        report.returned += batch.length - i;
        return report;
      }
      if (outcome.kind === 'retry') report.retried++;
      if (outcome.kind === 'park') report.parked++;
      if (settled.state === 'ack') report.acked++;
      else report.returned++;
    }
    if (this.deps.settle.ackMode === 'batch') {
      for (const d of batch) this.journal('acked', d.message, 'batch returned');
    }
    return report;
  }

  /**
   * Runs the use case on a batch. Gives the whole batch back when the use case throws, or when it
   * reports an infrastructure failure and the backend gives back on that: then it resolves
   * `undefined`, or rejects with what the backend's give-back threw (a Lambda trigger's way).
   */
  async decide(batch: readonly D[]): Promise<Outcome[] | undefined> {
    let outcomes: Outcome[];
    try {
      outcomes = await this.deps.handler(batch.map((d) => d.message));
    } catch (err) {
      await this.giveBack(batch, err);
      return undefined;
    }
    if (outcomes.length !== batch.length) {
      await this.giveBack(
        batch,
        new Error(`the handler returned ${outcomes.length} outcomes for ${batch.length} messages`),
      );
      return undefined;
    }
    return outcomes;
  }

  /**
   * Settles one delivery (for backends that settle records on their own, like the SQS handler's
   * partial batch response). Gives that delivery back if it cannot be settled (`returned`, or
   * what the backend's give-back throws).
   */
  async settle(delivery: D, outcome: Outcome): Promise<Settled> {
    try {
      return await this.settleOne(delivery, outcome);
    } catch (err) {
      const cause = unsettled(delivery, err);
      await this.giveBack([delivery], cause);
      return { state: 'returned', detail: cause.message };
    }
  }

  private async settleOne(delivery: D, outcome: Outcome): Promise<Settled> {
    const { settle } = this.deps;
    const message = delivery.message;
    let settled: Settled = { state: 'ack' };
    let label = outcome.kind === 'ack' ? outcome.result : outcome.kind;
    if (outcome.kind === 'retry') {
      settled = await settle.retryLater(delivery, {
        delayMs: outcome.delayMs,
        attempt: outcome.attempt,
        errorClass: outcome.errorClass,
        error: outcome.error,
        firstFailureAt: message.firstFailureAt ?? this.now().toISOString(),
        origin: message.origin,
      });
      // The copy is confirmed (or the visibility changed); the original is not acknowledged yet.
      fault(this.retryFaultPoint);
      this.journal(
        'retry-scheduled',
        message,
        outcome.errorClass,
        settled.detail ? `${outcome.error} (${settled.detail})` : outcome.error,
      );
    } else if (outcome.kind === 'park') {
      const diagnosis = this.diagnose(message, outcome);
      try {
        settled = await settle.park(delivery, diagnosis);
      } catch (err) {
        this.parkRefused(message, 'given-back', err);
        throw err;
      }
      if (settled.state !== 'ack') {
        this.parkRefused(message, settled.state, settled.detail ?? 'parking refused it');
      }
      // Parked by us, or about to be by the broker: tell whoever waits for this message's answer.
      if (settled.state !== 'returned') await this.notify(message, diagnosis);
      this.journal(
        'parked',
        message,
        settled.state === 'ack'
          ? outcome.reason
          : settled.state === 'dead-lettered'
            ? 'dead-lettered by the broker'
            : 'parking refused it',
        settled.state === 'ack' ? diagnosis.error : (settled.detail ?? diagnosis.error),
      );
      label = 'park';
    }
    if (settled.state === 'ack') {
      await settle.ack(delivery);
      if (settle.ackMode === 'message') this.journal('acked', message, label);
    }
    return settled;
  }

  private async giveBack(deliveries: readonly D[], err: unknown): Promise<void> {
    const cause = asError(err);
    this.deps.logger?.warn('consumer gives the deliveries back; the broker will redeliver', {
      deliveries: deliveries.length,
      error: cause.message,
    });
    this.journal('abandoned', undefined, 'redelivery', cause.message);
    await this.deps.settle.giveBack(deliveries, cause);
  }

  private parkRefused(message: InboundMessage, fate: ParkRefused['fate'], err: unknown): void {
    const error = typeof err === 'string' ? err : asError(err).message;
    this.deps.logger?.error('parking refused a message', {
      messageId: message.messageId ?? null,
      fate,
      error,
    });
    try {
      this.options.onParkRefused?.({ messageId: message.messageId ?? null, fate, error });
    } catch {
      // a metric must never decide a message's fate
    }
  }

  /**
   * Publishes the use case's notice of a parked message (confirmed), before the original is
   * acknowledged. A notice that cannot be published is logged and does not hold the message up:
   * it is parked safely, and `parked notify` publishes the same notice (same id) from the
   * parking lot.
   */
  private async notify(message: InboundMessage, diagnosis: Diagnosis): Promise<void> {
    const notices = this.deps.notices;
    if (!notices) return;
    try {
      const notice = notices.build(message.body, diagnosis, 'consumer');
      if (!notice) return;
      const [outcome] = await notices.publisher.publish([notice]);
      if (outcome?.ok) {
        this.deps.logger?.info('park notice published', {
          messageId: diagnosis.messageId,
          notice: notice.id,
          type: notice.type,
        });
        return;
      }
      throw new Error(outcome ? `${outcome.reason}: ${outcome.error}` : 'no outcome');
    } catch (err) {
      this.deps.logger?.warn(
        'park notice not published: `parked notify` publishes it from the parking lot',
        { messageId: diagnosis.messageId, error: asError(err).message },
      );
    }
  }

  /** The diagnosis of a parked message: from the transport's view, else a peek at the body. */
  diagnose(message: InboundMessage, outcome: ParkOutcome): Diagnosis {
    const now = this.now().toISOString();
    const body = peekEnvelope(message.body);
    return {
      messageId: message.messageId ?? null,
      type: message.type ?? body.type ?? null,
      schemaVersion: message.schemaVersion ?? body.schemaVersion ?? null,
      attempts: message.attempt,
      firstFailureAt: message.firstFailureAt ?? now,
      parkedAt: now,
      reason: outcome.reason,
      errorClass: outcome.errorClass,
      error: truncate(outcome.error, DIAGNOSIS_ERROR_MAX),
      correlationId: message.correlationId ?? body.correlationId ?? null,
      traceId: body.traceId ?? null,
      producer: message.producer ?? body.producer ?? null,
      origin: message.origin ?? { queue: null, exchange: null, routingKey: null },
      consumer: this.options.consumer,
      ...(message.redrive
        ? { redriveCount: message.redrive.count, lastRedriveAt: message.redrive.lastAt }
        : {}),
    };
  }

  private journal(
    step: 'retry-scheduled' | 'parked' | 'acked' | 'abandoned',
    message: InboundMessage | undefined,
    outcome?: string,
    reason?: string,
  ): void {
    this.deps.journal?.recordMessage(step, message, outcome, reason);
  }
}

const truncate = (s: string, max: number) => (s.length > max ? `${s.slice(0, max - 1)}…` : s);

const unsettled = (delivery: Delivery, err: unknown) =>
  new Error(
    `cannot settle message ${delivery.message.messageId ?? '(no id)'}: ${asError(err).message}`,
    { cause: err },
  );

const asError = (err: unknown): Error =>
  err instanceof Error ? err : new Error(shortError(err), { cause: err });
