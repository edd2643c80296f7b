import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import httpHeaderNormalizer from '@middy/http-header-normalizer';
import httpJsonBodyParser from '@middy/http-json-body-parser';
import httpRouterHandler, { type Route } from '@middy/http-router';
import type {
  APIGatewayProxyEventV2,
  APIGatewayProxyStructuredResultV2,
  Context,
} from 'aws-lambda';
import {
  HttpError,
  RESUMING_RETRY_AFTER_S,
  serviceUnavailable,
  TRANSIENT_RETRY_AFTER_S,
} from '../../shared/http/errors.js';
import { DatabaseResumingError, type Logger, TransientDbError } from '../../shared/index.js';
import { correlationId } from '../../shared/middleware/correlationId.js';
import { httpBodyLimit } from '../../shared/middleware/httpBodyLimit.js';
import { httpJsonErrors } from '../../shared/middleware/httpJsonErrors.js';
import { OrderConflictError, OrderNotFoundError } from '../../shared/orders/errors.js';
import type { OrderService } from '../../shared/orders/OrderService.js';
import { parseOrderId, parsePlaceOrderBody } from '../../shared/orders/validation.js';

/** Bodies above this size are refused with 413 before parsing. */
export const MAX_BODY_BYTES = 16 * 1024;

type Event = APIGatewayProxyEventV2;
type Result = APIGatewayProxyStructuredResultV2;

const json = (statusCode: number, body: unknown): Result => ({
  statusCode,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
});

function toHttpError(err: unknown): unknown {
  if (err instanceof OrderNotFoundError) {
    return new HttpError(404, 'NotFound', err.message, { field: 'orderId' });
  }
  if (err instanceof OrderConflictError) {
    return new HttpError(409, 'Conflict', err.message, { field: err.field });
  }
  // Answered at once rather than retried here: a resume takes seconds, and the request's own
  // budget (function and API Gateway timeouts) is better spent by the client's retry.
  if (err instanceof DatabaseResumingError) {
    return serviceUnavailable(
      'the database is resuming; retry shortly',
      RESUMING_RETRY_AFTER_S,
      err,
    );
  }
  if (err instanceof TransientDbError) {
    return serviceUnavailable('the database is unavailable; retry', TRANSIENT_RETRY_AFTER_S, err);
  }
  return err;
}

const correlationOf = (event: Event) => event.headers?.['x-correlation-id'] ?? 'unknown';

/**
 * The orders HTTP API (API Gateway HTTP API, payload v2):
 * `POST /orders`, `POST /orders/{id}/cancel`, `GET /orders/{id}`.
 */
export function createPlaceOrderHandler(deps: { orders: OrderService; logger: Logger }) {
  const { orders, logger } = deps;

  const create = middy<Event, Result>()
    .use(httpJsonBodyParser())
    .handler(async (event) => {
      const body = parsePlaceOrderBody(event.body as unknown);
      try {
        const result = await orders.place({ ...body, correlationId: correlationOf(event) });
        logger.info(result.created ? 'order placed' : 'order already placed', {
          orderId: result.orderId,
          eventId: result.eventId,
        });
        return json(result.created ? 201 : 200, {
          orderId: result.orderId,
          eventId: result.eventId,
        });
      } catch (err) {
        throw toHttpError(err);
      }
    });

  const cancel = async (event: Event): Promise<Result> => {
    const orderId = parseOrderId(event.pathParameters?.id);
    try {
      const result = await orders.cancel(orderId, correlationOf(event));
      logger.info(result.cancelled ? 'order cancelled' : 'order already cancelled', { orderId });
      return json(200, result);
    } catch (err) {
      throw toHttpError(err);
    }
  };

  const get = async (event: Event): Promise<Result> => {
    const orderId = parseOrderId(event.pathParameters?.id);
    try {
      return json(200, await orders.get(orderId));
    } catch (err) {
      throw toHttpError(err);
    }
  };

  const routes: Route<Event, Result>[] = [
    { method: 'POST', path: '/orders', handler: create },
    { method: 'POST', path: '/orders/{id}/cancel', handler: cancel },
    { method: 'GET', path: '/orders/{id}', handler: get },
  ];

  return middy<Event, Result>()
    .use(injectLambdaContext(logger, { resetKeys: true }))
    .use(httpHeaderNormalizer())
    .use(correlationId({ logger }))
    .use(httpJsonErrors({ logger }))
    .use(httpBodyLimit({ maxBytes: MAX_BODY_BYTES }))
    .handler(httpRouterHandler(routes) as (event: Event, context: Context) => Promise<Result>);
}
