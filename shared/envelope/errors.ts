/** A message that is not a valid envelope, or of a schema major this code does not read. */
export class EnvelopeError extends Error {
  /** The first offending field, dotted (`aggregate.version`), or `body` when it is not JSON at all. */
  readonly field: string;
  /** True when the schema major is unknown (as opposed to a malformed envelope). */
  readonly unsupportedVersion: boolean;
  constructor(
    message: string,
    field: string,
    options?: ErrorOptions & { unsupportedVersion?: boolean },
  ) {
    super(message, options);
    this.name = 'EnvelopeError';
    this.field = field;
    this.unsupportedVersion = options?.unsupportedVersion ?? false;
  }
}
