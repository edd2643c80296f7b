import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { createLogger, outboxKick } from '../../shared/index.js';
import { transactionDeadline } from '../../shared/middleware/transactionDeadline.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { sharedDb, sharedKick } from '../commons/clients.js';
import { createPlaceOrderHandler } from './handler.js';

const logger = createLogger('place-order');
// A resuming cluster is answered at once (503, Retry-After): the client retries, not the function.
const db = sharedDb({ service: 'place-order', logger, waitForResume: false });

/**
 * Lambda entry point: wires the container's clients into the handler; open transactions are
 * rolled back before the function times out; a POST that succeeded (an order placed or
 * cancelled: outbox rows committed) kicks the relay.
 */
export const handler = createPlaceOrderHandler({
  orders: new OrderService({ db }),
  logger,
})
  .use(transactionDeadline({ db, logger }))
  .use(
    outboxKick<APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2>({
      kick: sharedKick('place-order', logger),
      when: ({ event, response }) =>
        event.requestContext.http.method === 'POST' &&
        (response?.statusCode ?? 500) >= 200 &&
        (response?.statusCode ?? 500) < 300,
    }),
  );
