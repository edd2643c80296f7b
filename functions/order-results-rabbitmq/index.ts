import { createLogger, Journal } from '../../shared/index.js';
import { transactionDeadline } from '../../shared/middleware/transactionDeadline.js';
import { OrderResults } from '../../shared/orders/OrderResults.js';
import { amazonMqLambdaHandler } from '../../shared/transport/rabbitmq/index.js';
import { sharedDb, sharedRabbit } from '../commons/clients.js';

const logger = createLogger('order-results-rabbitmq');
const db = sharedDb({ service: 'order-results-rabbitmq', logger });
const journal = new Journal(logger);
const useCase = new OrderResults({ db, logger, journal });

/**
 * Lambda entry point (Amazon MQ event source mapping on `orders.inventory-results`): the same
 * trigger handler as reserve-inventory, around the order side's results use case. It only
 * acknowledges (returns) or gives the batch back (throws), so no copy is ever published.
 */
export const handler = amazonMqLambdaHandler({
  driver: sharedRabbit(logger).amazonMqDriver((m) => useCase.process(m), {
    journal,
    queue: 'results',
  }),
  logger,
}).use(transactionDeadline({ db, logger }));
