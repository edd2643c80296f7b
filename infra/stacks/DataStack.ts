import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CfnOutput,
  CustomResource,
  Duration,
  Stack,
  type StackProps,
  Token,
  Validations,
} from 'aws-cdk-lib';
import { SubnetType, Vpc } from 'aws-cdk-lib/aws-ec2';
import {
  AuroraPostgresEngineVersion,
  ClusterInstance,
  Credentials,
  DatabaseCluster,
  DatabaseClusterEngine,
  DatabaseSecret,
} from 'aws-cdk-lib/aws-rds';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { functionEnvironment } from '../../shared/config/functionEnvironment.js';
import { APP_LOGIN_USER, DB_ROLES, DB_SIDES, type DbSide } from '../../shared/db/appRole.js';
import { deployProvider } from '../constructs/deployProvider.js';
import { addFlowLogs } from '../constructs/flowLogs.js';
import { NodeFunction } from '../constructs/NodeFunction.js';
import { MIGRATIONS_SOURCE } from '../paths.js';

/**
 * The engine: Aurora PostgreSQL 16's long-term-support minor (a non-LTS minor is withdrawn about a
 * year after its release, and then a new deployment fails: docs/aws-facts.md, "Aurora"; the test
 * compares it with the LTS the facts name). Automatic minor upgrades are off on the instance, as
 * AWS advises to stay on an LTS minor; AWS still patches it to the LTS's latest patch yearly.
 */
export const ENGINE_VERSION = AuroraPostgresEngineVersion.VER_16_8;

/** Automated backups kept (days; Aurora's default is 1). */
export const BACKUP_RETENTION_DAYS = 14;

/** The cluster's capacity range when not overridden (ACU; 0 lets it pause when idle). */
export const DEFAULT_CAPACITY = { minAcu: 0, maxAcu: 4 } as const;

/**
 * Idle seconds before a cluster at 0 ACU pauses: AWS's default, written out so that the template
 * says it (docs/aws-facts.md; the local deployment's emulated pause reads it from there).
 */
export const DEFAULT_SECONDS_UNTIL_AUTO_PAUSE = 300;

export interface DataStackProps extends StackProps {
  /** Aurora Serverless v2 minimum capacity (ACU); 0 lets the cluster pause when idle. */
  minCapacity?: number;
  maxCapacity?: number;
  /** With a minimum of 0: idle seconds before the cluster pauses (300–86,400). */
  secondsUntilAutoPause?: number;
  databaseName?: string;
  /** On by default; `-c deletionProtection=false` for throw-away deployments. */
  deletionProtection?: boolean;
  /**
   * Keep the legacy login `pipeline_fn` (its secret `AppSecret`, exported, and its user kept up to
   * date), which functions deployed before the per-side logins use until their pipeline stack is
   * updated. Default true; `-c legacyAppLogin=false` retires it (docs/deploy.md, "Secret rotation").
   */
  legacyAppLogin?: boolean;
}

/**
 * The database: Aurora PostgreSQL Serverless v2 with the RDS Data API, in a VPC of its own. The
 * functions reach it over the Data API (HTTPS), so they need no VPC, no NAT and no pool.
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
    this.databaseName = props.databaseName ?? 'reliable_messaging';
    const minAcu = props.minCapacity ?? DEFAULT_CAPACITY.minAcu;
    const vpc = new Vpc(this, 'Vpc', {
      maxAzs: 2,
      natGateways: 0,
      subnetConfiguration: [{ name: 'db', subnetType: SubnetType.PRIVATE_ISOLATED }],
    });
    addFlowLogs(vpc);
    this.cluster = new DatabaseCluster(this, 'Db', {
      engine: DatabaseClusterEngine.auroraPostgres({ version: ENGINE_VERSION }),
      writer: ClusterInstance.serverlessV2('writer', { autoMinorVersionUpgrade: false }),
      backup: { retention: Duration.days(BACKUP_RETENTION_DAYS) },
      serverlessV2MinCapacity: minAcu,
      serverlessV2MaxCapacity: props.maxCapacity ?? DEFAULT_CAPACITY.maxAcu,
      // every caller but place-order waits out a resume (docs/design.md §12)
      ...(minAcu === 0
        ? {
            serverlessV2AutoPauseDuration: Duration.seconds(
              props.secondsUntilAutoPause ?? DEFAULT_SECONDS_UNTIL_AUTO_PAUSE,
            ),
          }
        : {}),
      enableDataApi: true,
      credentials: Credentials.fromGeneratedSecret('app'),
      defaultDatabaseName: this.databaseName,
      storageEncrypted: true,
      iamAuthentication: true,
      deletionProtection: props.deletionProtection ?? true,
      vpc,
      vpcSubnets: { subnetType: SubnetType.PRIVATE_ISOLATED },
    });
    // Each side's login credentials: generated here, attached to the cluster (host, port, engine
    // added: the shape Secrets Manager's multi-user rotation expects), created in the database by
    // the migrate function.
    const loginSecret = (id: string, username: string) => {
      const secret = new DatabaseSecret(this, id, {
        username,
        dbname: this.databaseName,
        ...(this.cluster.secret ? { masterSecret: this.cluster.secret } : {}),
      });
      Validations.of(secret).acknowledge(MANUAL_ROTATION);
      return secret.attach(this.cluster);
    };
    this.dbSecrets = {
      orders: loginSecret('OrdersDbSecret', DB_ROLES.orders.login),
      inventory: loginSecret('InventoryDbSecret', DB_ROLES.inventory.login),
      relay: loginSecret('RelayDbSecret', DB_ROLES.relay.login),
      maintenance: loginSecret('MaintenanceDbSecret', DB_ROLES.maintenance.login),
    };
    // The legacy login, while kept: exported explicitly, so that a pipeline stack deployed before
    // the per-side logins (which imports it) keeps working until it is updated.
    const legacy = props.legacyAppLogin ?? true;
    this.appSecret = legacy ? loginSecret('AppSecret', APP_LOGIN_USER) : undefined;
    if (this.appSecret) this.exportValue(this.appSecret.secretArn);
    // Migrations on deploy: a custom resource whose version is the migrations' checksums, so a new
    // migration re-runs it (applying only what is pending). It alone runs as the master user.
    const migrateFn = new NodeFunction(this, 'migrate', {
      name: 'migrate',
      timeoutSeconds: 300,
      migrations: [MIGRATIONS_SOURCE],
      environment: functionEnvironment({
        dataApi: {
          resourceArn: this.cluster.clusterArn,
          secretArn: this.cluster.secret?.secretArn ?? '',
          database: this.databaseName,
        },
        dbSecretArns: {
          orders: this.dbSecrets.orders.secretArn,
          inventory: this.dbSecrets.inventory.secretArn,
          relay: this.dbSecrets.relay.secretArn,
          maintenance: this.dbSecrets.maintenance.secretArn,
        },
        ...(this.appSecret
          ? { appDbSecretArn: this.appSecret.secretArn }
          : { retiredDbLogin: APP_LOGIN_USER }),
      }),
    });
    this.cluster.grantDataApiAccess(migrateFn);
    this.cluster.secret?.grantRead(migrateFn);
    const logins = [
      ...DB_SIDES.map((side) => this.dbSecrets[side]),
      ...(this.appSecret ? [this.appSecret] : []),
    ];
    for (const secret of logins) secret.grantRead(migrateFn);
    const provider = deployProvider(this, 'MigrationsProvider', migrateFn);
    // Runs again when a migration is added and when the logins change (a secret replaced, the
    // legacy login retired): the users in the database follow their secrets.
    const migrations = new CustomResource(this, 'Migrations', {
      serviceToken: provider.serviceToken,
      resourceType: 'Custom::Migrations',
      properties: {
        version: migrationsVersion(),
        logins: logins.map((secret) => secret.secretArn),
      },
    });
    migrations.node.addDependency(this.cluster);

    new CfnOutput(this, 'MigrateFunction', { value: migrateFn.functionName });
    // docs/deploy.md, "Secret rotation", is the procedure for every secret of this stack.
    Validations.of(this.cluster).acknowledge(MANUAL_ROTATION);
  }

  /** AZs pinned so `cdk synth` needs no credentials or lookups. */
  override get availabilityZones(): string[] {
    return Token.isUnresolved(this.region)
      ? super.availabilityZones
      : [`${this.region}a`, `${this.region}b`];
  }
}

// No automatic rotation: a rotation function would need a Secrets Manager endpoint in the isolated
// VPC (the Data API needs none).
const MANUAL_ROTATION = {
  id: 'AwsSolutions::AwsSolutions-SMG4',
  reason:
    'Rotated by the manual procedure in docs/deploy.md, "Secret rotation" (automatic rotation would need a rotation function and a Secrets Manager endpoint in the isolated VPC).',
};

/** A digest of every migration file the bundle ships: changes when one is added. */
function migrationsVersion(): string {
  const hash = createHash('sha256');
  for (const f of readdirSync(MIGRATIONS_SOURCE)
    .filter((x) => x.endsWith('.sql'))
    .sort()) {
    hash.update(f).update(readFileSync(join(MIGRATIONS_SOURCE, f)));
  }
  return hash.digest('hex').slice(0, 16);
}
