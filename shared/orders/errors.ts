/** Base class of the order use cases' errors. */
export class OrderError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'OrderError';
  }
}

/** No order has that orderId. */
export class OrderNotFoundError extends OrderError {
  constructor(readonly orderId: string) {
    super(`order ${orderId} does not exist`);
    this.name = 'OrderNotFoundError';
  }
}

/** The same orderId was placed before with a different sku or quantity. */
export class OrderConflictError extends OrderError {
  constructor(
    readonly orderId: string,
    readonly field: 'sku' | 'quantity',
  ) {
    super(`order ${orderId} already exists with a different ${field}`);
    this.name = 'OrderConflictError';
  }
}
