import { Duration, Validations } from 'aws-cdk-lib';
import { type IVpc, type SubnetSelection, SubnetType, Vpc } from 'aws-cdk-lib/aws-ec2';
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
import { DatabaseMigrations, type DatabaseMigrationsProps } from './DatabaseMigrations.js';
import {
  type DataApiLogin,
  type DatabaseAccess,
  dataApiAccess,
  dataApiLogin,
} from './databaseAccess.js';
import { addFlowLogs } from './flowLogs.js';

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

/** The database's capacity, name, protection, logins, network and migrations. */
export interface ServerlessDatabaseProps<Name extends string = string> {
  /**
   * Its network (default: a VPC of its own, `Vpc` beside it in `scope`: two AZs, isolated
   * subnets, flow logs). The functions reach the database over the Data API and need none.
   */
  vpc?: IVpc;
  /** Default: the isolated subnets. */
  vpcSubnets?: SubnetSelection;
  /** Minimum capacity (ACU); 0 (the default) lets the cluster pause when idle. */
  minCapacity?: number;
  /** Default 4 ACU. */
  maxCapacity?: number;
  /** With a minimum of 0: idle seconds before the cluster pauses (300–86,400; default 300). */
  secondsUntilAutoPause?: number;
  /**
   * The cluster's default database, the one the Data API calls and the migrate function name
   * (default `reliable_messaging`). Other databases of the cluster are your migrate function's to
   * create (the master user may): give it their names in `migrate.environment`.
   */
  databaseName?: string;
  /** Default on. */
  deletionProtection?: boolean;
  /**
   * The logins your functions reach the database as, by name (`login(name)`): each a user of its
   * own (`username`) and a member of one group role (`group`, which your migrations create and
   * grant), its secret generated here and attached to the cluster, the user created or updated by
   * the migrate function on every deploy (`DB_LOGIN_SECRETS`).
   */
  logins: Readonly<Record<Name, { username: string; group: string }>>;
  /**
   * The migrate function and the migrations it applies on deploy: `entry` (your handler, built
   * like this repository's `functions/migrate`), `extraMigrations`, a folder of yours applied
   * with the library's, and `environment`, more of its variables (a changed value runs it again).
   * Its id is `migrate`, beside the cluster in `scope`.
   */
  migrate: Pick<
    DatabaseMigrationsProps,
    'entry' | 'name' | 'migrations' | 'extraMigrations' | 'environment'
  >;
}

/** `inventory` → `Inventory`, `shipping-service` → `ShippingService` (construct ids). */
const pascal = (name: string) =>
  name.replace(/(^|[^A-Za-z0-9])([A-Za-z0-9])/g, (_, _sep, c: string) => c.toUpperCase());

// No automatic rotation: a rotation function would need a Secrets Manager endpoint in the isolated
// VPC (the Data API needs none).
const MANUAL_ROTATION = {
  id: 'AwsSolutions::AwsSolutions-SMG4',
  reason:
    'Rotated by the manual procedure in docs/deploy.md, "Secret rotation" (automatic rotation would need a rotation function and a Secrets Manager endpoint in the isolated VPC).',
};

/**
 * Aurora PostgreSQL Serverless v2 with the RDS Data API, the cluster being this construct, and
 * beside it in `scope`: its VPC (unless given), one login per name (`<Name>DbSecret`, e.g.
 * `OrdersDbSecret`: generated, attached to the cluster, created by the migrate function as a
 * member of its group role, which your migrations create) and the migrations applied on deploy
 * (`DatabaseMigrations`). A function reaches the Data API with its login (`login(name)`), never
 * the master's. One per scope (fixed ids).
 */
export class ServerlessDatabase<Name extends string = string> extends DatabaseCluster {
  /** The cluster's default database (`databaseName`). */
  readonly databaseName: string;
  /** Each login's secret, by name (`logins`). */
  readonly dbSecrets: Readonly<Record<Name, ISecret>>;
  /** The migrate function, run on deploy. */
  readonly migrations: DatabaseMigrations;
  /** How the functions reach it: the cluster's Data API, one login per name. */
  readonly access: DatabaseAccess<Name>;

  constructor(scope: Construct, id: string, props: ServerlessDatabaseProps<Name>) {
    const databaseName = props.databaseName ?? 'reliable_messaging';
    const minAcu = props.minCapacity ?? DEFAULT_CAPACITY.minAcu;
    super(scope, id, {
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
      defaultDatabaseName: databaseName,
      storageEncrypted: true,
      iamAuthentication: true,
      deletionProtection: props.deletionProtection ?? true,
      vpc: props.vpc ?? isolatedVpc(scope),
      vpcSubnets: props.vpcSubnets ?? { subnetType: SubnetType.PRIVATE_ISOLATED },
    });
    this.databaseName = databaseName;
    // Each side's login credentials: generated here, attached to the cluster (host, port, engine
    // added: the shape Secrets Manager's multi-user rotation expects), created in the database by
    // the migrate function.
    const loginSecret = (secretId: string, username: string) => {
      const secret = new DatabaseSecret(scope, secretId, {
        username,
        dbname: databaseName,
        ...(this.secret ? { masterSecret: this.secret } : {}),
      });
      Validations.of(secret).acknowledge(MANUAL_ROTATION);
      return secret.attach(this);
    };
    const entries = Object.entries(props.logins) as [Name, { username: string; group: string }][];
    this.dbSecrets = Object.fromEntries(
      entries.map(([name, login]) => [
        name,
        loginSecret(`${pascal(name)}DbSecret`, login.username),
      ]),
    ) as Record<Name, ISecret>;
    // Migrations on deploy: they alone run as the master user.
    this.migrations = new DatabaseMigrations(scope, 'migrate', {
      ...props.migrate,
      cluster: this,
      databaseName,
      groupLogins: Object.fromEntries(
        entries.map(([name, login]) => [login.group, this.dbSecrets[name]]),
      ),
    });
    // docs/deploy.md, "Secret rotation", is the procedure for every secret of the database.
    Validations.of(this).acknowledge(MANUAL_ROTATION);
    this.access = dataApiAccess(this, databaseName, this.dbSecrets);
  }

  /** The login `name`: what a function's environment names and is granted. */
  login(side: Name): DataApiLogin {
    return dataApiLogin(this.access, side);
  }
}

/** Two AZs of isolated subnets with flow logs (`Vpc`, in `scope`). */
function isolatedVpc(scope: Construct): Vpc {
  const vpc = new Vpc(scope, 'Vpc', {
    maxAzs: 2,
    natGateways: 0,
    subnetConfiguration: [{ name: 'db', subnetType: SubnetType.PRIVATE_ISOLATED }],
  });
  addFlowLogs(vpc);
  return vpc;
}
