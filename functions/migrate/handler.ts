import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import {
  APP_LOGIN_USER,
  DB_SIDES,
  type DbSide,
  ensureAppLogin,
  ensureServiceLogins,
  GROUP_ROLES,
} from '../../shared/db/appRole.js';
import { type DbLogin, retireLogin } from '../../shared/db/logins.js';
import { migrate } from '../../shared/db/migrate.js';
import type { SqlDatabase } from '../../shared/db/types.js';
import type { Logger } from '../../shared/logger.js';

export interface MigrateResponse {
  PhysicalResourceId: string;
  Data: {
    applied: number;
    skipped: number;
    /** The legacy login user (`pipeline_fn`), or '' when there is none. */
    appUser: string;
    /** The sides' login users, `orders,inventory,relay,maintenance` order, comma-separated. */
    logins: string;
  };
}

export interface MigrateDeps {
  /** Connected as the migrating role (the Aurora master user when deployed). */
  db: SqlDatabase;
  logger: Logger;
  /**
   * Each side's login user from its secret, when deployed (`DB_LOGIN_SECRETS`, by group role): created or
   * updated after the migrations, a member of its side's group role only. Absent locally.
   */
  serviceLogins?: () => Promise<Partial<Record<DbSide, DbLogin>>>;
  /**
   * The legacy login (`pipeline_fn`, `APP_DB_SECRET_ARN`), kept up to date while functions deployed
   * before the per-side logins may still use it.
   */
  appLogin?: () => Promise<DbLogin>;
  /** A login to retire after the migrations (`RETIRED_DB_LOGIN`): no login, no groups. */
  retiredLogin?: string;
}

/**
 * Applies the migrations on deploy: the `onEvent` handler of a CloudFormation custom resource
 * (CDK Provider framework). Create and Update apply what is pending (a re-run is a no-op), then
 * create or update the sides' login users (and the legacy one, or retire it); Delete keeps the
 * data. Through the Data API each statement is its own call, in one transaction per migration
 * (note: Aurora commits DDL implicitly, so a failing migration may leave part of it).
 */
export function createMigrateHandler(deps: MigrateDeps) {
  return middy<CloudFormationCustomResourceEvent, MigrateResponse>()
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .handler(async (event) => {
      if (event.RequestType === 'Delete') {
        return {
          PhysicalResourceId: event.PhysicalResourceId,
          Data: { applied: 0, skipped: 0, appUser: '', logins: '' },
        };
      }
      const { applied, skipped } = await migrate(deps.db);
      deps.logger.info('migrations applied', { applied, skipped: skipped.length });
      let logins = '';
      if (deps.serviceLogins) {
        const ready = await ensureServiceLogins(deps.db, await deps.serviceLogins(), {
          legacy: APP_LOGIN_USER,
        });
        logins = DB_SIDES.map((side) => ready[side]?.username ?? '').join(',');
        deps.logger.info('database logins ready', { logins: ready });
      }
      let appUser = '';
      if (deps.appLogin) {
        const login = await ensureAppLogin(deps.db, await deps.appLogin());
        appUser = login.username;
        deps.logger.info('legacy database login ready', { ...login });
      }
      if (deps.retiredLogin) {
        const retired = await retireLogin(deps.db, deps.retiredLogin, GROUP_ROLES);
        deps.logger.info('database login retired', { username: deps.retiredLogin, retired });
      }
      return {
        PhysicalResourceId: 'schema-migrations',
        Data: { applied: applied.length, skipped: skipped.length, appUser, logins },
      };
    });
}
