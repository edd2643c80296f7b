/** A stock change refused: a quantity that is not a whole number ≥ 0, or below what is reserved. */
export class StockError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StockError';
  }
}
