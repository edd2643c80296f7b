/**
 * An error that becomes an HTTP response as it is: status, message and, for input errors, the
 * offending field. Thrown by validation and mapped from use-case errors at the edge.
 */
export class HttpError extends Error {
  readonly statusCode: number;
  readonly field: string | undefined;
  readonly code: string;
  readonly expose = true;
  constructor(
    statusCode: number,
    code: string,
    message: string,
    options?: ErrorOptions & { field?: string },
  ) {
    super(message, options);
    this.name = 'HttpError';
    this.statusCode = statusCode;
    this.code = code;
    this.field = options?.field;
  }
}
