import { loadBudget } from '../../shared/config/budget.js';
import { loadEnv } from '../../shared/config/env.js';
import { CODE_VERSION } from '../../shared/config/version.js';
import { Journal } from '../../shared/consumer/journal.js';
import { INVENTORY_CONSUMER, ReserveInventory } from '../../shared/inventory/ReserveInventory.js';
import { createLogger } from '../../shared/logger.js';
import { SqsSettler } from '../../shared/transport/sqs/SqsSettler.js';
import { required, sharedDb, sharedSqs } from '../commons/clients.js';
import { createReserveInventorySqsHandler } from './handler.js';

const env = loadEnv();
const logger = createLogger('reserve-inventory-sqs');
const budget = loadBudget();
const journal = new Journal(logger);
const useCase = new ReserveInventory({ db: sharedDb(), logger, journal }, { budget });

/** Lambda entry point (SQS event source mapping with ReportBatchItemFailures). */
export const handler = createReserveInventorySqsHandler({
  process: (messages) => useCase.process(messages),
  settler: new SqsSettler(
    { client: sharedSqs() },
    {
      sourceUrl: required(env, 'SOURCE_QUEUE_URL'),
      parkingUrl: required(env, 'PARKING_QUEUE_URL'),
      mode: env.SQS_RETRY_MODE,
      budget,
      consumer: `${INVENTORY_CONSUMER}@${CODE_VERSION}`,
      fifo: required(env, 'SOURCE_QUEUE_URL').endsWith('.fifo'),
    },
  ),
  logger,
  journal,
});
