import { inject } from 'vitest';

/** Service addresses checked (or started with testcontainers) by test/globalSetup.ts. */
const services = inject('services');

export const DATABASE_URL = services.databaseUrl;
export const AMQP_URL = services.amqpUrl;
export const RABBITMQ_MANAGEMENT_URL = services.managementUrl;

/** A short, unique, lowercase name for this test file's resources. */
export { scratchName as uniqueName } from '../../devkit/scratch.js';
