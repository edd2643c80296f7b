import { createLogger } from '../../shared/logger.js';
import { sharedDb } from '../commons/clients.js';
import { createMigrateHandler } from './handler.js';

/** Lambda entry point (custom resource on deploy; migrations are bundled beside it). */
export const handler = createMigrateHandler({ db: sharedDb(), logger: createLogger('migrate') });
