import { TransportError } from '../../port/errors.js';

/** Thrown to make the event source mapping hand the whole batch back to the broker. */
export class BatchNotSettledError extends TransportError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'BatchNotSettledError';
  }
}

/** A copy was refused or lost: the original must not be acknowledged. */
export class SettlePublishError extends TransportError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SettlePublishError';
  }
}
