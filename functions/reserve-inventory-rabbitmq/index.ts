import { createLogger, Journal, loadBudget, outboxKick } from '../../shared/index.js';
import { INVENTORY_PARK_NOTICES } from '../../shared/inventory/quarantine.js';
import { ReserveInventory } from '../../shared/inventory/ReserveInventory.js';
import { transactionDeadline } from '../../shared/middleware/transactionDeadline.js';
import { amazonMqLambdaHandler } from '../../shared/transport/rabbitmq/index.js';
import { serviceDb, sharedKick, sharedRabbit } from '../commons/clients.js';

const logger = createLogger('reserve-inventory-rabbitmq');
const db = serviceDb('inventory', { service: 'reserve-inventory-rabbitmq', logger });
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
