import { TransportError } from '../../port/errors.js';

/** Thrown to hand records back: the trigger keeps them and they become visible again later. */
export class SqsGiveBackError extends TransportError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SqsGiveBackError';
  }
}
