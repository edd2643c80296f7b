import { loadBudget } from '../../shared/config/budget.js';
import { CODE_VERSION } from '../../shared/config/version.js';
import { Journal } from '../../shared/consumer/journal.js';
import { INVENTORY_CONSUMER, ReserveInventory } from '../../shared/inventory/ReserveInventory.js';
import { createLogger } from '../../shared/logger.js';
import { RabbitSettler } from '../../shared/transport/rabbitmq/RabbitSettler.js';
import { sharedDb, sharedRabbit } from '../commons/clients.js';
import { createReserveInventoryRabbitHandler } from './handler.js';

const logger = createLogger('reserve-inventory-rabbitmq');
const budget = loadBudget();
const journal = new Journal(logger);
const useCase = new ReserveInventory({ db: sharedDb(), logger, journal }, { budget });

/** Lambda entry point (Amazon MQ event source mapping on `inventory.orders`). */
export const handler = createReserveInventoryRabbitHandler({
  process: (messages) => useCase.process(messages),
  settler: new RabbitSettler(
    { connection: sharedRabbit() },
    { budget, consumer: `${INVENTORY_CONSUMER}@${CODE_VERSION}` },
  ),
  logger,
  journal,
});
