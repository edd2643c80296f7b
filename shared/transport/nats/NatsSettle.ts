import type { JsMsg } from '@nats-io/jetstream';
import type { Delivery, Diagnosis, RetryRequest, Settle, Settled } from '../../port/types.js';
import { NATS_HEADERS } from './constants.js';
import { header, parkHeaders } from './messages.js';
import type { NatsClient } from './NatsClient.js';

/** A JetStream delivery. `parked`: its park copy is stored, so settling it terminates it. */
export interface NatsDelivery extends Delivery {
  readonly msg: JsMsg;
  parked: boolean;
}

export interface NatsSettleOptions {
  /** Where this consumer's park copies go (`<prefix>parked.<consumer>`). */
  parkingSubject: string;
  /** A confirmed ack or a park copy not answered by then fails. */
  ackTimeoutMs: number;
  publishTimeoutMs: number;
  /** The consumer's AckWait: a message whose park copy was refused comes back after it. */
  ackWaitMs: number;
  /** The budget's jitter (±fraction of each retry delay); 0: none. */
  jitter: number;
}

/** A retry delay with the budget's jitter: uniform over step·(1 − jitter) … step·(1 + jitter). */
function jitteredDelay(stepMs: number, jitter: number): number {
  return jitter > 0 ? Math.round(stepMs * (1 + jitter * (2 * Math.random() - 1))) : stepMs;
}

/**
 * The park copy's `Nats-Msg-Id`: the envelope id, the stream and the original's sequence. A park
 * copy published again for the same delivered message (its term was lost, it came back and was
 * parked again) is dropped by the parking stream's duplicate window; a message parked again
 * after a redrive is a new message (another sequence) and is stored.
 */
const parkCopyId = (msg: JsMsg) =>
  `${header(msg.headers, NATS_HEADERS.eventId) ?? 'no-id'}:park:${msg.info.stream}:${msg.seq}`;

/**
 * The settle contract on a JetStream pull consumer:
 * - ack: `ackAck`, the ack the server confirms: only then will JetStream not deliver the message
 *   again (a plain ack lost on the way would bring it back after AckWait); it costs a round trip
 *   per message, and one not answered rejects (the driver gives the rest back);
 * - retry later: `nak(delay)`, the budget's step with its jitter: JetStream delivers the same
 *   message again after the delay (attempt from the delivery count, as SQS's visibility mode);
 *   `returned`. A nak lost on the way brings it back after AckWait instead;
 * - park: a copy with the diagnosis to the parking stream, awaited until the stream acked it,
 *   then `term()` (the driver's ack): JetStream removes it and delivers it no more. If parking
 *   refuses the copy, `nak(AckWait)`: it comes back later (`returned`), as an SQS record after its
 *   visibility timeout;
 * - give back: `nak()` with no delay: delivered again at once, flagged redelivered.
 */
export class NatsSettle implements Settle<NatsDelivery> {
  readonly ackMode = 'message';

  constructor(
    private readonly deps: {
      client: NatsClient;
      /**
       * Hands deliveries back (`nak()` each): the worker's, which gives back what it buffered
       * behind them too, in stream order, and backs off.
       */
      giveBack: (deliveries: readonly NatsDelivery[]) => void;
    },
    private readonly options: NatsSettleOptions,
  ) {}

  async ack(d: NatsDelivery): Promise<void> {
    if (d.parked) {
      // A lost term brings the message back after AckWait, to be parked again: the copy's id
      // makes the parking stream drop the second copy.
      d.msg.term();
      return;
    }
    await d.msg.ackAck({ timeout: this.options.ackTimeoutMs });
  }

  async retryLater(d: NatsDelivery, retry: RetryRequest): Promise<Settled> {
    const delay = jitteredDelay(retry.delayMs, this.options.jitter);
    d.msg.nak(delay);
    return { state: 'returned', detail: `in ${delay} ms, nak` };
  }

  async park(d: NatsDelivery, diagnosis: Diagnosis): Promise<Settled> {
    try {
      const js = await this.deps.client.js();
      await js.publish(this.options.parkingSubject, d.msg.data, {
        msgID: parkCopyId(d.msg),
        headers: parkHeaders(d.msg, diagnosis),
        timeout: this.options.publishTimeoutMs,
      });
    } catch (err) {
      d.msg.nak(this.options.ackWaitMs);
      return { state: 'returned', detail: `parking refused it: ${(err as Error).message}` };
    }
    d.parked = true;
    return { state: 'ack' };
  }

  async giveBack(deliveries: readonly NatsDelivery[]): Promise<void> {
    this.deps.giveBack(deliveries);
  }
}
