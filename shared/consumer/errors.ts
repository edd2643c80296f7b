/** A message that can never be processed as it is (missing id, wrong type, bad data…). */
export class PermanentMessageError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'PermanentMessageError';
  }
}
