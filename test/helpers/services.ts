import { inject } from 'vitest';

/** Service addresses checked (or started with testcontainers) by test/globalSetup.ts. */
const services = inject('services');

export const DATABASE_URL = services.databaseUrl;
export const AMQP_URL = services.amqpUrl;
export const RABBITMQ_MANAGEMENT_URL = services.managementUrl;

/** A short, unique, lowercase name for this test file's resources. */
export function uniqueName(prefix: string): string {
  const slug = prefix
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .slice(0, 30);
  return `rm_${slug}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
}
