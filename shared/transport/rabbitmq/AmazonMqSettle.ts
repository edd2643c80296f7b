import type { Delivery, Diagnosis, RetryRequest, Settle, Settled } from '../../port/types.js';
import { type RabbitMQEvent, rawFromRmqMessage } from './amazonMqEvent.js';
import { type AmqpMessage, inboundFromRaw, type RabbitCopies } from './copies.js';
import { BatchNotSettledError } from './errors.js';

/** A message of the Amazon MQ trigger's event. */
export interface AmazonMqDelivery extends Delivery {
  raw: AmqpMessage;
}

/** The messages of an Amazon MQ (RabbitMQ) event, in order, as deliveries. */
export function amazonMqDeliveries(event: RabbitMQEvent): AmazonMqDelivery[] {
  // keyed "<queue>::<vhost>"; the event names no exchange or routing key (the headers do)
  return Object.entries(event.rmqMessagesByQueue ?? {}).flatMap(([key, records]) => {
    const queue = key.split('::')[0] || undefined;
    return records.map((record) => {
      const raw = rawFromRmqMessage(record);
      return { raw, message: inboundFromRaw(raw, record.redelivered ?? false, { queue }) };
    });
  });
}

/**
 * The settle contract behind the Amazon MQ (RabbitMQ) trigger. That trigger has no partial batch
 * response: returning normally acknowledges every message of the batch, throwing hands the whole
 * batch back. So acks take effect per batch; retries and parking are confirmed copies published
 * inside the invocation (the same copies as the worker's); giving back is throwing.
 *
 * A database outage is settled per message like any transient failure, as the worker and both
 * SQS modes do: the broker is up, so each message gets its confirmed retry copy on the ladder (and
 * is parked `exhausted`/`transient` once the budget is spent) and the handler returns normally.
 * Giving the batch back instead would be a hot requeue loop outside the budget, ended only by the
 * quorum queue's `delivery-limit` (which RabbitMQ 4.3 no longer counts for requeues). The handler
 * throws only when a copy cannot be published (the broker is unreachable too).
 */
export class AmazonMqSettle implements Settle<AmazonMqDelivery> {
  readonly ackMode = 'batch';

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
