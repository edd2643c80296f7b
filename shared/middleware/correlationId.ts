import { randomUUID } from 'node:crypto';
import type { MiddlewareObj, Request } from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import type { Logger } from '../index.js';

const VALID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Takes the caller's `x-correlation-id` (when well-formed), else the API Gateway request id, else a
 * new UUID; puts it on every log line, in the event's `x-correlation-id` header and on the response.
 */
export function correlationId(
  options: { logger?: Logger } = {},
): MiddlewareObj<APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2> {
  const pick = (event: APIGatewayProxyEventV2): string => {
    const header = event.headers?.['x-correlation-id'];
    if (header && VALID.test(header)) return header;
    return event.requestContext?.requestId || randomUUID();
  };
  const correlationIdBefore = (request: Request<APIGatewayProxyEventV2>) => {
    const id = pick(request.event);
    (request.internal as Record<string, unknown>).correlationId = id;
    // Route handlers read it where they read everything else: the (normalized) headers.
    request.event.headers = { ...request.event.headers, 'x-correlation-id': id };
    options.logger?.setCorrelationId(id);
  };
  const correlationIdAfter = (
    request: Request<APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2>,
  ) => {
    const id = (request.internal as Record<string, unknown>).correlationId as string | undefined;
    if (!id || !request.response || typeof request.response !== 'object') return;
    request.response.headers = { ...request.response.headers, 'x-correlation-id': id };
  };
  return { before: correlationIdBefore, after: correlationIdAfter, onError: correlationIdAfter };
}
