import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { type DbLogin, ensureAppLogin } from '../../shared/db/appRole.js';
import { migrate } from '../../shared/db/migrate.js';
import type { SqlDatabase } from '../../shared/db/types.js';
import type { Logger } from '../../shared/logger.js';

export interface MigrateResponse {
  PhysicalResourceId: string;
  Data: { applied: number; skipped: number; appUser: string };
}

export interface MigrateDeps {
  /** Connected as the migrating role (the Aurora master user when deployed). */
  db: SqlDatabase;
  logger: Logger;
  /**
   * The functions' login user from its secret, when deployed (`APP_DB_SECRET_ARN`): created or
   * updated after the migrations, a member of the app role. Absent locally.
   */
  appLogin?: () => Promise<DbLogin>;
}

/**
 * Applies the migrations on deploy: the `onEvent` handler of a CloudFormation custom resource
 * (CDK Provider framework). Create and Update apply what is pending (a re-run is a no-op), then
 * create or update the functions' login user; Delete keeps the data. Through the Data API each
 * statement is its own call, in one transaction per migration (note: Aurora commits DDL
 * implicitly, so a failing migration may leave part of it).
 */
export function createMigrateHandler(deps: MigrateDeps) {
  return middy<CloudFormationCustomResourceEvent, MigrateResponse>()
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .handler(async (event) => {
      if (event.RequestType === 'Delete') {
        return {
          PhysicalResourceId: event.PhysicalResourceId,
          Data: { applied: 0, skipped: 0, appUser: '' },
        };
      }
      const { applied, skipped } = await migrate(deps.db);
      deps.logger.info('migrations applied', { applied, skipped: skipped.length });
      let appUser = '';
      if (deps.appLogin) {
        const login = await ensureAppLogin(deps.db, await deps.appLogin());
        appUser = login.username;
        deps.logger.info('application database user ready', { ...login });
      }
      return {
        PhysicalResourceId: 'schema-migrations',
        Data: { applied: applied.length, skipped: skipped.length, appUser },
      };
    });
}
