/** Base class of transport errors. */
export class TransportError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TransportError';
  }
}

/** The broker cannot be reached now; try again later. */
export class TransportUnavailableError extends TransportError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TransportUnavailableError';
  }
}
