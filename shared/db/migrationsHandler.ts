import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import middy from '@middy/core';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { ConfigError } from '../config/errors.js';
import { createLogger, type Logger } from '../logger.js';
import { ensureLogin, parseDbSecret } from './logins.js';
import { type Migration, migrate } from './migrate.js';
import type { SqlDatabase } from './types.js';

export interface MigrationsHandlerOptions {
  /** The database, as the migrating user (the cluster's master user when deployed). */
  db: SqlDatabase;
  /**
   * Everything to apply, in order: the library's tables (`libraryMigrations`) and yours
   * (`loadMigrations` of the folder the construct bundles). Read at each event.
   */
  migrations: () => Promise<readonly Migration[]> | readonly Migration[];
  /**
   * The secret of each login to create or update after the migrations, by the group role it
   * joins (default: `DB_LOGIN_SECRETS`, which `ServerlessDatabase` sets for your `logins`).
   */
  loginSecrets?: Readonly<Record<string, string>>;
  /** Default: a client of the function's region. */
  secrets?: SecretsManagerClient;
  logger?: Logger;
}

export interface MigrationsResponse {
  PhysicalResourceId: string;
  Data: { applied: number; skipped: number; logins: string };
}

/** `group=arn,…` (`DB_LOGIN_SECRETS`) as a record. */
function loginSecretsFromEnv(): Record<string, string> {
  const value = process.env.DB_LOGIN_SECRETS ?? '';
  return Object.fromEntries(
    value
      .split(',')
      .filter((pair) => pair.trim() !== '')
      .map((pair) => {
        const [group, arn] = pair.split('=', 2);
        if (!group || !arn) throw new ConfigError(`DB_LOGIN_SECRETS: "${pair}" is not group=arn`);
        return [group, arn];
      }),
  );
}

/**
 * The migrate function of a service of yours, behind `DatabaseMigrations` (the CDK Provider
 * framework's `onEvent` on deploy): Create and Update apply what is pending of `migrations` (a
 * re-run is a no-op), then create or update each login from its secret as a member of its group
 * role (its password as a SCRAM verifier; never the migrating user, a superuser or a group
 * role); Delete keeps the data. docs/deploy.md, "Deploying your own handler".
 */
export function migrationsLambdaHandler(options: MigrationsHandlerOptions) {
  const logger = options.logger ?? createLogger('migrate');
  let secrets = options.secrets;
  return middy<CloudFormationCustomResourceEvent, MigrationsResponse>()
    .use(injectLambdaContext(logger, { resetKeys: true }))
    .handler(async (event) => {
      if (event.RequestType === 'Delete') {
        return {
          PhysicalResourceId: event.PhysicalResourceId,
          Data: { applied: 0, skipped: 0, logins: '' },
        };
      }
      const { applied, skipped } = await migrate(options.db, [...(await options.migrations())]);
      logger.info('migrations applied', { applied, skipped: skipped.length });
      const users: string[] = [];
      for (const [group, arn] of Object.entries(options.loginSecrets ?? loginSecretsFromEnv())) {
        secrets ??= new SecretsManagerClient({});
        const out = await secrets.send(new GetSecretValueCommand({ SecretId: arn }));
        let login: ReturnType<typeof parseDbSecret>;
        try {
          login = parseDbSecret(out.SecretString);
        } catch (err) {
          throw new ConfigError(`the login secret of ${group}: ${(err as Error).message}`, {
            cause: err,
          });
        }
        const ready = await ensureLogin(options.db, login, group);
        users.push(ready.username);
        logger.info('database login ready', { ...ready, group });
      }
      return {
        PhysicalResourceId: 'schema-migrations',
        Data: { applied: applied.length, skipped: skipped.length, logins: users.join(',') },
      };
    });
}
