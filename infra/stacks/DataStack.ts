import { CfnOutput, Stack, type StackProps, Token } from 'aws-cdk-lib';
import type { DatabaseCluster } from 'aws-cdk-lib/aws-rds';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { DB_ROLES, type DbSide } from '../../shared/pipeline/appRole.js';
import {
  functionEnvironment,
  ServerlessDatabase,
  type ServerlessDatabaseProps,
} from '../constructs/index.js';
import { MIGRATIONS_SOURCE } from '../paths.js';

export {
  BACKUP_RETENTION_DAYS,
  DEFAULT_CAPACITY,
  DEFAULT_SECONDS_UNTIL_AUTO_PAUSE,
  ENGINE_VERSION,
} from '../constructs/index.js';

/** The order service's database when not overridden: the cluster's default database. */
export const DEFAULT_DATABASE_NAME = 'reliable_messaging';

/**
 * The inventory service's database beside the order service's `databaseName`: suffixed
 * `_inventory`, the rule `inventoryDatabaseUrl` (shared/pipeline/schema.ts) applies locally.
 */
export function inventoryDatabaseNameOf(databaseName: string): string {
  return `${databaseName}_inventory`;
}

/** The database's settings (`ServerlessDatabase`), from the app's context (infra/pipelineApp.ts). */
export type DataStackProps = StackProps &
  Pick<
    ServerlessDatabaseProps,
    'minCapacity' | 'maxCapacity' | 'secondsUntilAutoPause' | 'databaseName' | 'deletionProtection'
  > & {
    /**
     * The inventory service's database in the same cluster (default `<databaseName>_inventory`),
     * created by the migrate function on deploy.
     */
    inventoryDatabaseName?: string;
  };

/**
 * The reference deployment's logins: one per side, each in its side's group role (the services'
 * `_roles` migrations).
 */
export const SIDE_LOGINS = Object.fromEntries(
  Object.entries(DB_ROLES).map(([side, role]) => [
    side,
    { username: role.login, group: role.group },
  ]),
) as Record<DbSide, { username: string; group: string }>;

/**
 * The database: Aurora PostgreSQL Serverless v2 with the RDS Data API, in a VPC of its own
 * (`ServerlessDatabase`). One cluster, one database per service: the order service's is the
 * cluster's default (`databaseName`), the inventory service's (`inventoryDatabaseName`) is created
 * by the migrate function, which applies each service's migrations to its database on deploy. The
 * functions reach them over the Data API (HTTPS), so they need no VPC, no NAT and no pool.
 */
export class DataStack extends Stack {
  readonly cluster: DatabaseCluster;
  /** The order service's database: the cluster's default. */
  readonly databaseName: string;
  /** The inventory service's database in the same cluster. */
  readonly inventoryDatabaseName: string;
  /**
   * Each side's database login (`orders_fn`, `inventory_fn`, `relay_fn`, `maintenance_fn`, members
   * of the sides' group roles): a function reaches the Data API with its side's secret, never the
   * master's. Roles belong to the cluster, so one login reaches each database its group is
   * granted.
   */
  readonly dbSecrets: Record<DbSide, ISecret>;

  constructor(scope: Construct, id: string, props: DataStackProps = {}) {
    super(scope, id, props);
    const databaseName = props.databaseName ?? DEFAULT_DATABASE_NAME;
    const inventoryDatabaseName =
      props.inventoryDatabaseName ?? inventoryDatabaseNameOf(databaseName);
    if (inventoryDatabaseName === databaseName) {
      throw new Error(
        `DataStack: inventoryDatabaseName ${inventoryDatabaseName} is the order service's database: each service owns one`,
      );
    }
    const db = new ServerlessDatabase<DbSide>(this, 'Db', {
      minCapacity: props.minCapacity,
      maxCapacity: props.maxCapacity,
      secondsUntilAutoPause: props.secondsUntilAutoPause,
      databaseName,
      deletionProtection: props.deletionProtection,
      logins: SIDE_LOGINS,
      migrate: {
        name: 'migrate',
        migrations: MIGRATIONS_SOURCE,
        environment: functionEnvironment({ inventoryDataApiDatabase: inventoryDatabaseName }),
      },
    });
    this.cluster = db;
    this.databaseName = db.databaseName;
    this.inventoryDatabaseName = inventoryDatabaseName;
    this.dbSecrets = db.dbSecrets;
    new CfnOutput(this, 'MigrateFunction', { value: db.migrations.functionName });
  }

  /** AZs pinned so `cdk synth` needs no credentials or lookups. */
  override get availabilityZones(): string[] {
    return Token.isUnresolved(this.region)
      ? super.availabilityZones
      : [`${this.region}a`, `${this.region}b`];
  }
}
