import { createLogger, loadBudget } from '../../shared/index.js';
import { loadRetention } from '../../shared/maintenance/retention.js';
import { transactionDeadline } from '../../shared/middleware/transactionDeadline.js';
import { serviceDb } from '../commons/clients.js';
import { createMaintenanceHandler } from './handler.js';

const logger = createLogger('maintenance');
const dbs = {
  orders: serviceDb('orders', { service: 'maintenance', logger }),
  inventory: serviceDb('inventory', { service: 'maintenance', logger }),
};

/**
 * Lambda entry point (EventBridge schedule, once a day). The deadline bounds its transactions and
 * its wait for a resuming cluster (the run usually meets one: the database is paused at rest).
 */
const retention = loadRetention();
export const handler = createMaintenanceHandler({
  dbs,
  logger,
  retention,
  budget: loadBudget(process.env, undefined, retention),
})
  .use(transactionDeadline({ db: dbs.orders, logger }))
  .use(transactionDeadline({ db: dbs.inventory, logger }));
