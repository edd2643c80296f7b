import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { ConfigError, loadEnv } from '../../shared/config/env.js';
import { DB_ROLES, DB_SIDES, type DbSide } from '../../shared/db/appRole.js';
import { type DbLogin, parseDbSecret } from '../../shared/db/logins.js';
import { createLogger } from '../../shared/logger.js';
import { transactionDeadline } from '../../shared/middleware/transactionDeadline.js';
import { sharedDb } from '../commons/clients.js';
import { createMigrateHandler } from './handler.js';

/** Lambda entry point (custom resource on deploy; migrations are bundled beside it). */
const env = loadEnv();
const logger = createLogger('migrate');
const db = sharedDb({ service: 'migrate', logger });
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
const appSecretArn = env.APP_DB_SECRET_ARN;
export const handler = createMigrateHandler({
  db,
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
  ...(appSecretArn ? { appLogin: () => readLogin(appSecretArn, 'APP_DB_SECRET_ARN') } : {}),
  ...(env.RETIRED_DB_LOGIN ? { retiredLogin: env.RETIRED_DB_LOGIN } : {}),
}).use(transactionDeadline({ db, logger }));
