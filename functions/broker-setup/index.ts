import { createLogger } from '../../shared/logger.js';
import { sharedRabbit } from '../commons/clients.js';
import { createBrokerSetupHandler } from './handler.js';

/** Lambda entry point (custom resource on deploy of the RabbitMQ pipeline stack). */
const logger = createLogger('broker-setup');
export const handler = createBrokerSetupHandler({ backend: sharedRabbit(logger), logger });
