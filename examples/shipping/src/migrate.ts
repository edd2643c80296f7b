import { migrationsLambdaHandler } from 'reliable-messaging-serverless/data-api';
import { dataApiDatabase, env } from './deployed.js';
import { migrations } from './shipping.js';

/**
 * The shipping service's migrate function, run on deploy by the `DatabaseMigrations` custom
 * resource: the library's tables (inbox, outbox) and `migrations/` (bundled beside it,
 * `MIGRATIONS_DIR`), as the cluster's master user, then the service's logins from their secrets.
 */
const db = dataApiDatabase();

export const handler = migrationsLambdaHandler({
  db,
  migrations: () => migrations(env('MIGRATIONS_DIR')),
});
