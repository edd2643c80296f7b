import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { DataApiDatabase, migrationsLambdaHandler } from 'reliable-messaging-serverless/data-api';
import { migrations } from './shipping.js';

/**
 * The shipping service's migrate function, run on deploy by the `DatabaseMigrations` custom
 * resource: the library's tables (inbox, outbox) and `migrations/` (bundled beside it,
 * `MIGRATIONS_DIR`), as the cluster's master user, then the service's logins from their secrets.
 */
const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};

const db = new DataApiDatabase(
  { client: new RDSDataClient({}) },
  {
    resourceArn: env('DATA_API_RESOURCE_ARN'),
    secretArn: env('DATA_API_SECRET_ARN'),
    database: env('DATA_API_DATABASE'),
  },
);

export const handler = migrationsLambdaHandler({
  db,
  migrations: () => migrations(env('MIGRATIONS_DIR')),
});
