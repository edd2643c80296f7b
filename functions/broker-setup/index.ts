import { loadBudget } from '../../shared/config/budget.js';
import { loadEnv } from '../../shared/config/env.js';
import { createLogger } from '../../shared/logger.js';
import { loadRetention } from '../../shared/maintenance/retention.js';
import { sharedManagement, sharedRabbit } from '../commons/clients.js';
import { createBrokerSetupHandler } from './handler.js';

/** Lambda entry point (custom resource on deploy of the RabbitMQ pipeline stack). */
const retention = loadRetention();
export const handler = createBrokerSetupHandler({
  connection: sharedRabbit(),
  management: sharedManagement,
  vhost: loadEnv().BROKER_VHOST,
  budget: loadBudget(process.env, undefined, retention),
  retention,
  logger: createLogger('broker-setup'),
});
