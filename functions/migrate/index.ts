import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import {
  ConfigError,
  createLogger,
  type DbLogin,
  loadEnv,
  parseDbSecret,
} from '../../shared/index.js';
import { transactionDeadline } from '../../shared/middleware/transactionDeadline.js';
import { DB_ROLES, DB_SIDES, type DbSide } from '../../shared/pipeline/appRole.js';
import { inventoryDatabaseUrl } from '../../shared/pipeline/schema.js';
import { required, serviceDb } from '../commons/clients.js';
import { createMigrateHandler } from './handler.js';

/**
 * Lambda entry point (custom resource on deploy; migrations are bundled beside it). It reaches
 * both services' databases of the cluster as the master user (`DATA_API_SECRET_ARN`): the order
 * service's (`DATA_API_DATABASE`) and the inventory service's (`INVENTORY_DATA_API_DATABASE`).
 */
const env = loadEnv();
const logger = createLogger('migrate');
const ordersDb = serviceDb('orders', { service: 'migrate', logger });
const inventoryDb = serviceDb('inventory', { service: 'migrate', logger });
/** The inventory database's name: the Data API's, or (node-postgres) its URL's. */
const inventoryName =
  env.DB_DRIVER === 'data-api'
    ? required(env, 'INVENTORY_DATA_API_DATABASE')
    : decodeURIComponent(new URL(inventoryDatabaseUrl(env)).pathname.slice(1));
const secrets = new SecretsManagerClient({ region: env.AWS_REGION });
const readLogin = async (secretId: string, label: string): Promise<DbLogin> => {
  const out = await secrets.send(new GetSecretValueCommand({ SecretId: secretId }));
  try {
    return parseDbSecret(out.SecretString);
  } catch (err) {
    throw new ConfigError(`${label}: ${(err as Error).message}`, { cause: err });
  }
};
// each side's login secret, by its group role (`DB_LOGIN_SECRETS`, set by ServerlessDatabase)
const sides = DB_SIDES.flatMap((side) => {
  const arn = env.DB_LOGIN_SECRETS?.[DB_ROLES[side].group];
  return arn ? [[side, arn] as const] : [];
});
export const handler = createMigrateHandler({
  ordersDb,
  inventory: { name: inventoryName, db: inventoryDb },
  logger,
  ...(sides.length > 0
    ? {
        serviceLogins: async () => {
          const out: Partial<Record<DbSide, DbLogin>> = {};
          for (const [side, arn] of sides) {
            out[side] = await readLogin(arn, `DB_LOGIN_SECRETS (${DB_ROLES[side].group})`);
          }
          return out;
        },
      }
    : {}),
})
  .use(transactionDeadline({ db: ordersDb, logger }))
  .use(transactionDeadline({ db: inventoryDb, logger }));
