import { loadBudget } from '../../shared/config/budget.js';
import { Journal } from '../../shared/consumer/journal.js';
import { INVENTORY_PARK_NOTICES } from '../../shared/inventory/quarantine.js';
import { ReserveInventory } from '../../shared/inventory/ReserveInventory.js';
import { createLogger } from '../../shared/logger.js';
import { transactionDeadline } from '../../shared/middleware/transactionDeadline.js';
import { outboxKick } from '../../shared/outbox/kick.js';
import { amazonMqLambdaHandler } from '../../shared/transport/rabbitmq/index.js';
import { sharedDb, sharedKick, sharedRabbit } from '../commons/clients.js';

const logger = createLogger('reserve-inventory-rabbitmq');
const db = sharedDb({ service: 'reserve-inventory-rabbitmq', logger });
const journal = new Journal(logger);
const useCase = new ReserveInventory({ db, logger, journal }, { budget: loadBudget() });

/** Lambda entry point (Amazon MQ event source mapping on `inventory.orders`). */
export const handler = amazonMqLambdaHandler({
  // a parked order event is announced to the order side (inventory.reservation_quarantined)
  driver: sharedRabbit(logger).amazonMqDriver((m) => useCase.process(m), {
    journal,
    notices: INVENTORY_PARK_NOTICES,
  }),
  logger,
})
  .use(transactionDeadline({ db, logger }))
  // reservations write their results to inventory_outbox
  .use(outboxKick({ kick: sharedKick('reserve-inventory-rabbitmq', logger) }));
