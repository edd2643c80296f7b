import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CustomResource } from 'aws-cdk-lib';
import type { DatabaseCluster } from 'aws-cdk-lib/aws-rds';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Provider } from 'aws-cdk-lib/custom-resources';
import type { Construct } from 'constructs';
import { functionEnvironment } from '../../shared/config/functionEnvironment.js';
import { deployProvider } from './deployProvider.js';
import { NodeFunction, type NodeFunctionProps } from './NodeFunction.js';

/** The migrate function: your migrate handler, the cluster, the migrations, the logins. */
export interface DatabaseMigrationsProps
  extends Omit<NodeFunctionProps, 'timeoutSeconds' | 'migrations' | 'network'> {
  /** Default 300. */
  timeoutSeconds?: number;
  /** The cluster: its Data API, as its master user (whose secret only this function reads). */
  cluster: DatabaseCluster;
  /**
   * The database the function reaches (`DATA_API_DATABASE`): the cluster's default, which the
   * migrations apply to. A handler that migrates more databases of the cluster gets their names in
   * `environment` (the master user reaches every one).
   */
  databaseName: string;
  /**
   * Your migrations: a folder of `NNNN_name.sql` files, bundled beside the handler as
   * `migrations/` (`MIGRATIONS_DIR`); your handler applies the library's tables
   * (`libraryMigrations`) and these (`migrationsLambdaHandler`). The reference deployment passes
   * its services' schemas (`shared/pipeline/migrations`).
   */
  migrations?: string;
  /**
   * A second folder bundled with the first, all applied in the order of their names (a name in
   * both, or another pattern, fails the synth).
   */
  extraMigrations?: string;
  /**
   * The logins, by the group role each joins: created or updated from its secret after the
   * migrations (`DB_LOGIN_SECRETS`, read by `migrationsLambdaHandler`).
   */
  groupLogins?: Readonly<Record<string, ISecret>>;
}

/** The migration runner's pattern (shared/db/migrate.ts): other files are not applied. */
const MIGRATION_FILE = /^\d{4}_[a-z0-9_]+\.sql$/;

/**
 * The function that applies the migrations on deploy (`entry`: a handler built like this
 * repository's `functions/migrate`), with the migrations bundled beside it: the library's and
 * yours (`extraMigrations`). Beside it in `scope`: a CDK Provider (`MigrationsProvider`) and the
 * custom resource (`Migrations`, `Custom::Migrations`) whose version is a digest of every
 * migration file, so that a new migration runs it again (applying only what is pending), as do
 * changed logins. It alone runs as the master user. One per scope (fixed ids).
 */
export class DatabaseMigrations extends NodeFunction {
  /** The CDK Provider framework that invokes it on deploy. */
  readonly provider: Provider;
  /** The custom resource that runs it on deploy. */
  readonly customResource: CustomResource;

  constructor(scope: Construct, id: string, props: DatabaseMigrationsProps) {
    const { cluster, databaseName, migrations, extraMigrations, groupLogins, ...fn } = props;
    const folders = [migrations, extraMigrations].filter((f): f is string => f !== undefined);
    const version = migrationsVersion(folders, Boolean(extraMigrations));
    super(scope, id, {
      ...fn,
      timeoutSeconds: props.timeoutSeconds ?? 300,
      migrations: folders,
      environment: {
        ...functionEnvironment({
          dataApi: {
            resourceArn: cluster.clusterArn,
            secretArn: cluster.secret?.secretArn ?? '',
            database: databaseName,
          },
          ...(groupLogins
            ? {
                groupLoginSecretArns: Object.fromEntries(
                  Object.entries(groupLogins).map(([group, secret]) => [group, secret.secretArn]),
                ),
              }
            : {}),
        }),
        ...props.environment,
      },
    });
    cluster.grantDataApiAccess(this);
    cluster.secret?.grantRead(this);
    const secrets = Object.values(groupLogins ?? {});
    for (const secret of secrets) secret.grantRead(this);
    this.provider = deployProvider(scope, 'MigrationsProvider', this);
    // Runs again when a migration is added, when the logins change (a secret replaced: the users
    // in the database follow their secrets) and when your environment does (another database).
    this.customResource = new CustomResource(scope, 'Migrations', {
      serviceToken: this.provider.serviceToken,
      resourceType: 'Custom::Migrations',
      properties: {
        version,
        logins: secrets.map((secret) => secret.secretArn),
        ...(props.environment ? { environment: props.environment } : {}),
      },
    });
    this.customResource.node.addDependency(cluster);
  }
}

/**
 * A digest of every migration file the bundle ships: changes when one is added. Two folders may
 * not share a file name (the bundle ships them in one); yours must match the runner's pattern.
 */
function migrationsVersion(folders: readonly string[], checkLast: boolean): string {
  const files = new Map<string, string>();
  folders.forEach((folder, i) => {
    if (!existsSync(folder)) throw new Error(`DatabaseMigrations: no folder ${folder}`);
    for (const file of readdirSync(folder).filter((f) => f.endsWith('.sql'))) {
      if (files.has(file)) {
        throw new Error(
          `DatabaseMigrations: ${file} is in ${files.get(file)} and ${folder}: migrations are applied by name, give yours another number`,
        );
      }
      if (checkLast && i === folders.length - 1 && !MIGRATION_FILE.test(file)) {
        throw new Error(
          `DatabaseMigrations: ${join(folder, file)}: not a migration name (NNNN_lowercase_name.sql), it would never be applied`,
        );
      }
      files.set(file, folder);
    }
  });
  const hash = createHash('sha256');
  for (const file of [...files.keys()].sort()) {
    hash.update(file).update(readFileSync(join(files.get(file) as string, file)));
  }
  return hash.digest('hex').slice(0, 16);
}
