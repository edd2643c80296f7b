import { createLogger } from '../../shared/logger.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { sharedDb } from '../commons/clients.js';
import { createPlaceOrderHandler } from './handler.js';

/** Lambda entry point: wires the container's clients into the handler. */
export const handler = createPlaceOrderHandler({
  orders: new OrderService({ db: sharedDb() }),
  logger: createLogger('place-order'),
});
