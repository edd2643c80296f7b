import { loadBudget } from '../../shared/config/budget.js';
import { createLogger } from '../../shared/logger.js';
import { loadRetention } from '../../shared/maintenance/retention.js';
import { transactionDeadline } from '../../shared/middleware/transactionDeadline.js';
import { sharedDb } from '../commons/clients.js';
import { createMaintenanceHandler } from './handler.js';

const logger = createLogger('maintenance');
const db = sharedDb({ service: 'maintenance', logger });

/**
 * Lambda entry point (EventBridge schedule, once a day). The deadline bounds its transactions and
 * its wait for a resuming cluster (the run usually meets one: the database is paused at rest).
 */
const retention = loadRetention();
export const handler = createMaintenanceHandler({
  db,
  logger,
  retention,
  budget: loadBudget(process.env, undefined, retention),
}).use(transactionDeadline({ db, logger }));
