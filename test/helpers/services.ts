import { inject } from 'vitest';
import type { Services } from '../../devkit/scratch.js';

/** Service addresses checked (or started with testcontainers) by test/globalSetup.ts. */
const services = inject('services');

export const DATABASE_URL = services.databaseUrl;
export const AMQP_URL = services.amqpUrl;
export const RABBITMQ_MANAGEMENT_URL = services.managementUrl;

/** The services of this run, as `createScratch` takes them (add `sqsEndpoint` for SQS). */
export const SERVICES: Services = {
  databaseUrl: DATABASE_URL,
  amqpUrl: AMQP_URL,
  managementUrl: RABBITMQ_MANAGEMENT_URL,
};

/** A short, unique, lowercase name for this test file's resources. */
export { scratchName as uniqueName } from '../../devkit/scratch.js';
