import { createLogger, Journal } from '../../shared/index.js';
import { transactionDeadline } from '../../shared/middleware/transactionDeadline.js';
import { OrderResults } from '../../shared/orders/OrderResults.js';
import { sqsLambdaHandler } from '../../shared/transport/sqs/index.js';
import { sharedDb, sharedSqs } from '../commons/clients.js';

const logger = createLogger('order-results-sqs');
const db = sharedDb({ service: 'order-results-sqs', logger });
const journal = new Journal(logger);
const useCase = new OrderResults({ db, logger, journal });
// The deployed queue URLs come from the environment (RESULTS_QUEUE_URL): no call to SQS here.
const consumer = await sharedSqs(logger).lambdaDriver((m) => useCase.process(m), {
  journal,
  queue: 'results',
});

/**
 * Lambda entry point (SQS event source mapping on `orders-inventory-results` with
 * ReportBatchItemFailures): the same trigger handler as reserve-inventory, around the order
 * side's results use case.
 */
export const handler = sqsLambdaHandler({ ...consumer, logger }).use(
  transactionDeadline({ db, logger }),
);
