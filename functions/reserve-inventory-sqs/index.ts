import { createLogger, Journal, loadBudget, outboxKick } from '../../shared/index.js';
import { INVENTORY_PARK_NOTICES } from '../../shared/inventory/quarantine.js';
import { ReserveInventory } from '../../shared/inventory/ReserveInventory.js';
import { transactionDeadline } from '../../shared/middleware/transactionDeadline.js';
import { sqsLambdaHandler } from '../../shared/transport/sqs/index.js';
import { serviceDb, sharedKick, sharedSqs } from '../commons/clients.js';

const logger = createLogger('reserve-inventory-sqs');
const db = serviceDb('inventory', { service: 'reserve-inventory-sqs', logger });
const journal = new Journal(logger);
const useCase = new ReserveInventory({ db, logger, journal }, { budget: loadBudget() });
// The deployed queue URLs come from the environment: no call to SQS here.
// A parked order event is announced to the order side (inventory.reservation_quarantined) on the
// results queue (RESULTS_QUEUE_URL).
const consumer = await sharedSqs(logger).lambdaDriver((m) => useCase.process(m), {
  journal,
  notices: INVENTORY_PARK_NOTICES,
});

/** Lambda entry point (SQS event source mapping with ReportBatchItemFailures). */
export const handler = sqsLambdaHandler({ ...consumer, logger })
  .use(transactionDeadline({ db, logger }))
  // reservations write their results to inventory_outbox
  .use(outboxKick({ kick: sharedKick('reserve-inventory-sqs', logger) }));
