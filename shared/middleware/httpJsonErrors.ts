import type { MiddlewareObj, Request } from '@middy/core';
import type { Logger } from '../index.js';

interface ErrorLike {
  statusCode?: number;
  headers?: Record<string, string>;
  expose?: boolean;
  field?: string;
  code?: string;
  message?: string;
  cause?: { package?: string; data?: unknown; message?: string };
}

/** Keys the JSON body parser refuses anywhere in a body (prototype pollution guard). */
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor']);

/**
 * The parser answers 422 for three different things: a body that is not JSON (the cause carries
 * the parser's message), no body at all, and a forbidden key (the cause's data is the key).
 */
function bodyParserMessage(cause: NonNullable<ErrorLike['cause']>): string {
  if (cause.message !== undefined) return 'body: not valid JSON';
  if (typeof cause.data === 'string' && FORBIDDEN_KEYS.has(cause.data)) {
    return `body: forbidden key "${cause.data}"`;
  }
  if (cause.data === undefined) return 'body: is required';
  return 'body: not valid JSON';
}

/**
 * Turns any error into a JSON response `{ error, message, field? }`. Client errors (4xx) say what
 * was wrong; anything else is logged and answered with a generic 500 that leaks nothing.
 * Malformed JSON, a missing body or a forbidden key such as `__proto__` (422 from
 * `@middy/http-json-body-parser`) is answered 400, naming `body` and which of the three it was.
 */
export function httpJsonErrors(options: { logger?: Logger } = {}): MiddlewareObj {
  const httpJsonErrorsOnError = (request: Request) => {
    if (request.response !== undefined && request.response !== null) return;
    const err = (request.error ?? {}) as ErrorLike;
    let status = typeof err.statusCode === 'number' ? err.statusCode : 500;
    let body: Record<string, unknown>;
    if (status >= 400 && status < 500 && err.expose !== false) {
      let field = err.field;
      let message = err.message ?? 'bad request';
      if (err.cause?.package === '@middy/http-json-body-parser') {
        field = 'body';
        if (status === 422) {
          status = 400;
          message = bodyParserMessage(err.cause);
        } else {
          message = 'body: Content-Type must be application/json';
        }
      }
      body = { error: err.code ?? errorName(status), message, ...(field ? { field } : {}) };
    } else if (status === 503 && err.expose === true) {
      // the service cannot answer now and says when to try again (`retry-after` in its headers)
      options.logger?.warn('service unavailable', { error: err.message });
      body = { error: err.code ?? 'ServiceUnavailable', message: err.message ?? 'unavailable' };
    } else {
      status = 500;
      options.logger?.error('unhandled error', request.error as Error);
      body = { error: 'InternalError', message: 'internal error' };
    }
    request.response = {
      statusCode: status,
      headers: {
        ...(status === 503 && err.headers ? err.headers : {}),
        'content-type': 'application/json',
      },
      body: JSON.stringify(body),
    };
  };
  return { onError: httpJsonErrorsOnError };
}

function errorName(status: number): string {
  switch (status) {
    case 404:
      return 'NotFound';
    case 405:
      return 'MethodNotAllowed';
    case 409:
      return 'Conflict';
    case 413:
      return 'PayloadTooLarge';
    case 415:
      return 'UnsupportedMediaType';
    default:
      return 'BadRequest';
  }
}
