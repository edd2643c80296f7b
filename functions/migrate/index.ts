import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { loadEnv } from '../../shared/config/env.js';
import { parseDbSecret } from '../../shared/db/appRole.js';
import { createLogger } from '../../shared/logger.js';
import { transactionDeadline } from '../../shared/middleware/transactionDeadline.js';
import { sharedDb } from '../commons/clients.js';
import { createMigrateHandler } from './handler.js';

/** Lambda entry point (custom resource on deploy; migrations are bundled beside it). */
const env = loadEnv();
const appSecretArn = env.APP_DB_SECRET_ARN;
const logger = createLogger('migrate');
const db = sharedDb({ service: 'migrate', logger });
export const handler = createMigrateHandler({
  db,
  logger,
  ...(appSecretArn
    ? {
        appLogin: async () => {
          const client = new SecretsManagerClient({ region: env.AWS_REGION });
          const out = await client.send(new GetSecretValueCommand({ SecretId: appSecretArn }));
          return parseDbSecret(out.SecretString);
        },
      }
    : {}),
}).use(transactionDeadline({ db, logger }));
