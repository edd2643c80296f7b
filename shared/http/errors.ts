/**
 * An error that becomes an HTTP response as it is: status, message and, for input errors, the
 * offending field. Thrown by validation and mapped from use-case errors at the edge.
 */
export class HttpError extends Error {
  readonly statusCode: number;
  readonly field: string | undefined;
  readonly code: string;
  readonly expose = true;
  /** Response headers it carries (e.g. `retry-after` on a 503). */
  readonly headers: Readonly<Record<string, string>>;
  constructor(
    statusCode: number,
    code: string,
    message: string,
    options?: ErrorOptions & { field?: string; headers?: Record<string, string> },
  ) {
    super(message, options);
    this.name = 'HttpError';
    this.statusCode = statusCode;
    this.code = code;
    this.field = options?.field;
    this.headers = { ...options?.headers };
  }
}

/** Seconds a client should wait before retrying when the database is resuming from auto-pause. */
export const RESUMING_RETRY_AFTER_S = 5;
/** Seconds a client should wait before retrying after another transient database error. */
export const TRANSIENT_RETRY_AFTER_S = 1;

/**
 * 503 with `Retry-After` for a database that cannot answer now but will (a paused Aurora cluster
 * resuming, a lost connection, a serialization failure): the request changed nothing and the
 * client may send it again (the same orderId makes it idempotent).
 */
export function serviceUnavailable(message: string, retryAfterSeconds: number, cause?: unknown) {
  return new HttpError(503, 'ServiceUnavailable', message, {
    cause,
    headers: { 'retry-after': String(retryAfterSeconds) },
  });
}
