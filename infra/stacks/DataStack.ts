import { CfnOutput, Stack, type StackProps, Token } from 'aws-cdk-lib';
import type { DatabaseCluster } from 'aws-cdk-lib/aws-rds';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { APP_LOGIN_USER, DB_ROLES, type DbSide } from '../../shared/db/appRole.js';
import {
  ServerlessDatabase,
  type ServerlessDatabaseProps,
} from '../constructs/ServerlessDatabase.js';
import { MIGRATIONS_SOURCE } from '../paths.js';

export {
  BACKUP_RETENTION_DAYS,
  DEFAULT_CAPACITY,
  DEFAULT_SECONDS_UNTIL_AUTO_PAUSE,
  ENGINE_VERSION,
} from '../constructs/ServerlessDatabase.js';

/** The database's settings (`ServerlessDatabase`), from the app's context (infra/pipelineApp.ts). */
export type DataStackProps = StackProps &
  Pick<
    ServerlessDatabaseProps,
    'minCapacity' | 'maxCapacity' | 'secondsUntilAutoPause' | 'databaseName' | 'deletionProtection'
  > & {
    /**
     * Keep the legacy login `pipeline_fn` (`AppSecret`), which functions deployed before the
     * per-side logins use. Default true; false retires it (docs/deploy.md, "Secret rotation").
     */
    legacyAppLogin?: boolean;
  };

/** The reference deployment's logins: one per side, each in its side's group role (migration 0006). */
export const SIDE_LOGINS = Object.fromEntries(
  Object.entries(DB_ROLES).map(([side, role]) => [
    side,
    { username: role.login, group: role.group },
  ]),
) as Record<DbSide, { username: string; group: string }>;

/**
 * The database: Aurora PostgreSQL Serverless v2 with the RDS Data API, in a VPC of its own, and
 * this repository's migrations applied on deploy (`ServerlessDatabase`). The functions reach it
 * over the Data API (HTTPS), so they need no VPC, no NAT and no pool.
 */
export class DataStack extends Stack {
  readonly cluster: DatabaseCluster;
  readonly databaseName: string;
  /**
   * Each side's database login (`orders_fn`, `inventory_fn`, `relay_fn`, `maintenance_fn`, members
   * of the group roles of migration 0006): a function reaches the Data API with its side's secret,
   * never the master's.
   */
  readonly dbSecrets: Record<DbSide, ISecret>;
  /**
   * The legacy login (`pipeline_fn`, migration 0005's app role), kept for functions deployed
   * before the per-side logins; undefined once retired (`legacyAppLogin: false`).
   */
  readonly appSecret: ISecret | undefined;

  constructor(scope: Construct, id: string, props: DataStackProps = {}) {
    super(scope, id, props);
    const db = new ServerlessDatabase<DbSide>(this, 'Db', {
      minCapacity: props.minCapacity,
      maxCapacity: props.maxCapacity,
      secondsUntilAutoPause: props.secondsUntilAutoPause,
      databaseName: props.databaseName,
      deletionProtection: props.deletionProtection,
      logins: SIDE_LOGINS,
      legacyLogin: { username: APP_LOGIN_USER, keep: props.legacyAppLogin ?? true },
      migrate: { name: 'migrate', migrations: MIGRATIONS_SOURCE },
    });
    this.cluster = db;
    this.databaseName = db.databaseName;
    this.dbSecrets = db.dbSecrets;
    this.appSecret = db.appSecret;
    // The legacy login, while kept: exported explicitly, so that a pipeline stack deployed before
    // the per-side logins (which imports it) keeps working until it is updated.
    if (this.appSecret) this.exportValue(this.appSecret.secretArn);
    new CfnOutput(this, 'MigrateFunction', { value: db.migrations.functionName });
  }

  /** AZs pinned so `cdk synth` needs no credentials or lookups. */
  override get availabilityZones(): string[] {
    return Token.isUnresolved(this.region)
      ? super.availabilityZones
      : [`${this.region}a`, `${this.region}b`];
  }
}
