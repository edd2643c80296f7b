import { loadBudget } from '../../shared/config/budget.js';
import { createLogger } from '../../shared/logger.js';
import { loadRetention } from '../../shared/maintenance/retention.js';
import { sharedDb } from '../commons/clients.js';
import { createMaintenanceHandler } from './handler.js';

/** Lambda entry point (EventBridge schedule, once a day). */
const retention = loadRetention();
export const handler = createMaintenanceHandler({
  db: sharedDb(),
  logger: createLogger('maintenance'),
  retention,
  budget: loadBudget(process.env, undefined, retention),
});
