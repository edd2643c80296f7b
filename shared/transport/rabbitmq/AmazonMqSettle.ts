import { TransportError } from '../errors.js';
import type { Delivery, Diagnosis, RetryRequest, Settle, Settled } from '../types.js';
import { type RabbitMQEvent, rawFromRmqMessage } from './amazonMqEvent.js';
import { inboundFromRaw, type RabbitCopies, type RawMessage } from './copies.js';

/** A message of the Amazon MQ trigger's event. */
export interface AmazonMqDelivery extends Delivery {
  raw: RawMessage;
}

/** Thrown to make the event source mapping hand the whole batch back to the broker. */
export class BatchNotSettledError extends TransportError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'BatchNotSettledError';
  }
}

/** The messages of an Amazon MQ (RabbitMQ) event, in order, as deliveries. */
export function amazonMqDeliveries(event: RabbitMQEvent): AmazonMqDelivery[] {
  return Object.values(event.rmqMessagesByQueue ?? {})
    .flat()
    .map((record) => {
      const raw = rawFromRmqMessage(record);
      return { raw, message: inboundFromRaw(raw, record.redelivered ?? false) };
    });
}

/**
 * The settle contract behind the Amazon MQ (RabbitMQ) trigger. That trigger has no partial batch
 * response: returning normally acknowledges every message of the batch, throwing hands the whole
 * batch back. So acks take effect per batch; retries and parking are confirmed copies published
 * inside the invocation (the same copies as the worker's); giving back is throwing. A database
 * outage gives the whole batch back (the broker redelivers it after the trigger's backoff).
 */
export class AmazonMqSettle implements Settle<AmazonMqDelivery> {
  readonly ackMode = 'batch';
  readonly onInfrastructureFailure = 'give-back';

  constructor(private readonly copies: RabbitCopies) {}

  async ack(): Promise<void> {}

  async retryLater(d: AmazonMqDelivery, retry: RetryRequest): Promise<Settled> {
    const bucket = await this.copies.retry(d.raw, retry);
    return { state: 'ack', detail: `in ${bucket} ms` };
  }

  async park(d: AmazonMqDelivery, diagnosis: Diagnosis): Promise<Settled> {
    await this.copies.park(d.raw, diagnosis);
    return { state: 'ack' };
  }

  async giveBack(_deliveries: readonly AmazonMqDelivery[], cause: Error): Promise<void> {
    throw new BatchNotSettledError(`${cause.message}: the batch goes back to the broker`, {
      cause,
    });
  }
}
