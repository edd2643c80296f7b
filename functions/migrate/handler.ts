import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import type { DbLogin, Logger, SqlDatabase } from '../../shared/index.js';
import { DB_SIDES, type DbSide, ensureServiceLogins } from '../../shared/pipeline/appRole.js';
import { ensureDatabase, migrateService } from '../../shared/pipeline/schema.js';

export interface MigrateResponse {
  PhysicalResourceId: string;
  /** Flat, so that each value is a `Fn::GetAtt` attribute of the custom resource. */
  Data: {
    /** Migrations applied to the order service's database, and those it had already. */
    ordersApplied: number;
    ordersSkipped: number;
    /** The same for the inventory service's database. */
    inventoryApplied: number;
    inventorySkipped: number;
    /** Whether this run created the inventory service's database. */
    inventoryCreated: boolean;
    /** The sides' login users, `orders,inventory,relay,maintenance` order, comma-separated. */
    logins: string;
  };
}

export interface MigrateDeps {
  /**
   * The order service's database, the cluster's default (`DATA_API_DATABASE`), as the migrating
   * role (the Aurora master user when deployed). The inventory database is created through it.
   */
  ordersDb: SqlDatabase;
  /**
   * The inventory service's database on the same cluster, as the same role: its name
   * (`INVENTORY_DATA_API_DATABASE`), created when the cluster has none of that name, and the
   * connection to it (`db`: nothing may reach it before it is created).
   */
  inventory: { name: string; db: SqlDatabase };
  logger: Logger;
  /**
   * Each side's login user from its secret, when deployed (`DB_LOGIN_SECRETS`, by group role): created or
   * updated after the migrations, a member of its side's group role only. Absent locally.
   */
  serviceLogins?: () => Promise<Partial<Record<DbSide, DbLogin>>>;
}

/**
 * Applies the migrations on deploy: the `onEvent` handler of a CloudFormation custom resource
 * (CDK Provider framework). Each service owns a database of the one cluster: Create and Update
 * apply what is pending to the order service's (the cluster's default), create the inventory
 * service's when missing and apply what is pending to it (a re-run is a no-op), then create or
 * update the sides' login users (roles belong to the cluster: once for both). A database of the
 * single-database layout is refused before anything changes (`migrateService`: docs/deploy.md,
 * "Upgrading"). Delete keeps the data. Through the Data API each statement is its own call, in one
 * transaction per migration (note: Aurora commits DDL implicitly, so a failing migration may leave
 * part of it).
 */
export function createMigrateHandler(deps: MigrateDeps) {
  return middy<CloudFormationCustomResourceEvent, MigrateResponse>()
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .handler(async (event) => {
      if (event.RequestType === 'Delete') {
        return {
          PhysicalResourceId: event.PhysicalResourceId,
          Data: {
            ordersApplied: 0,
            ordersSkipped: 0,
            inventoryApplied: 0,
            inventorySkipped: 0,
            inventoryCreated: false,
            logins: '',
          },
        };
      }
      const orders = await migrateService(deps.ordersDb, 'orders');
      deps.logger.info('migrations applied', {
        database: 'orders',
        applied: orders.applied,
        skipped: orders.skipped.length,
      });
      const inventoryCreated = await ensureDatabase(deps.ordersDb, deps.inventory.name);
      if (inventoryCreated) {
        deps.logger.info('database created', { database: deps.inventory.name });
      }
      const inventory = await migrateService(deps.inventory.db, 'inventory');
      deps.logger.info('migrations applied', {
        database: 'inventory',
        applied: inventory.applied,
        skipped: inventory.skipped.length,
      });
      let logins = '';
      if (deps.serviceLogins) {
        const ready = await ensureServiceLogins(deps.ordersDb, await deps.serviceLogins());
        logins = DB_SIDES.map((side) => ready[side]?.username ?? '').join(',');
        deps.logger.info('database logins ready', { logins: ready });
      }
      return {
        PhysicalResourceId: 'schema-migrations',
        Data: {
          ordersApplied: orders.applied.length,
          ordersSkipped: orders.skipped.length,
          inventoryApplied: inventory.applied.length,
          inventorySkipped: inventory.skipped.length,
          inventoryCreated,
          logins,
        },
      };
    });
}
