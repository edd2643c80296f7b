import type { MiddlewareObj } from '@middy/core';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { HttpError } from '../http/errors.js';

export interface HttpBodyLimitOptions {
  /** Largest accepted body, in bytes after base64 decoding. */
  maxBytes: number;
}

/** Refuses oversized bodies with 413 before anything parses them. */
export function httpBodyLimit(
  options: HttpBodyLimitOptions,
): MiddlewareObj<APIGatewayProxyEventV2> {
  const httpBodyLimitBefore = (request: { event: APIGatewayProxyEventV2 }) => {
    const { body, isBase64Encoded } = request.event;
    if (!body) return;
    const bytes = isBase64Encoded
      ? Buffer.byteLength(body, 'base64')
      : Buffer.byteLength(body, 'utf8');
    if (bytes > options.maxBytes) {
      throw new HttpError(
        413,
        'PayloadTooLarge',
        `body: larger than ${options.maxBytes} bytes (${bytes})`,
        {
          field: 'body',
        },
      );
    }
  };
  return { before: httpBodyLimitBefore };
}
