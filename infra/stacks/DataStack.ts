import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CustomResource, Stack, type StackProps, Token, Validations } from 'aws-cdk-lib';
import { SubnetType, Vpc } from 'aws-cdk-lib/aws-ec2';
import {
  AuroraPostgresEngineVersion,
  ClusterInstance,
  Credentials,
  DatabaseCluster,
  DatabaseClusterEngine,
} from 'aws-cdk-lib/aws-rds';
import type { Construct } from 'constructs';
import { DEFAULT_MIGRATIONS_DIR } from '../../shared/config/env.js';
import { functionEnvironment } from '../../shared/config/functionEnvironment.js';
import { deployProvider } from '../constructs/deployProvider.js';
import { NodeFunction } from '../constructs/NodeFunction.js';

export interface DataStackProps extends StackProps {
  /** Aurora Serverless v2 minimum capacity (ACU); 0 lets the cluster pause when idle. */
  minCapacity?: number;
  maxCapacity?: number;
  databaseName?: string;
  /** On by default; `-c deletionProtection=false` for throw-away deployments. */
  deletionProtection?: boolean;
}

/**
 * The database: Aurora PostgreSQL Serverless v2 with the RDS Data API, in a VPC of its own. The
 * functions reach it over the Data API (HTTPS), so they need no VPC, no NAT and no pool.
 */
export class DataStack extends Stack {
  readonly cluster: DatabaseCluster;
  readonly databaseName: string;

  constructor(scope: Construct, id: string, props: DataStackProps = {}) {
    super(scope, id, props);
    this.databaseName = props.databaseName ?? 'reliable_messaging';
    const vpc = new Vpc(this, 'Vpc', {
      maxAzs: 2,
      natGateways: 0,
      subnetConfiguration: [{ name: 'db', subnetType: SubnetType.PRIVATE_ISOLATED }],
    });
    vpc.addFlowLog('FlowLogs');
    this.cluster = new DatabaseCluster(this, 'Db', {
      engine: DatabaseClusterEngine.auroraPostgres({
        version: AuroraPostgresEngineVersion.VER_16_6,
      }),
      writer: ClusterInstance.serverlessV2('writer'),
      serverlessV2MinCapacity: props.minCapacity ?? 0,
      serverlessV2MaxCapacity: props.maxCapacity ?? 4,
      enableDataApi: true,
      credentials: Credentials.fromGeneratedSecret('app'),
      defaultDatabaseName: this.databaseName,
      storageEncrypted: true,
      iamAuthentication: true,
      deletionProtection: props.deletionProtection ?? true,
      vpc,
      vpcSubnets: { subnetType: SubnetType.PRIVATE_ISOLATED },
    });
    // Migrations on deploy: a custom resource whose version is the migrations' checksums, so a new
    // migration re-runs it (applying only what is pending).
    const migrateFn = new NodeFunction(this, 'migrate', {
      name: 'migrate',
      timeoutSeconds: 300,
      withMigrations: true,
      environment: functionEnvironment({
        dataApi: {
          resourceArn: this.cluster.clusterArn,
          secretArn: this.cluster.secret?.secretArn ?? '',
          database: this.databaseName,
        },
      }),
    });
    this.cluster.grantDataApiAccess(migrateFn);
    this.cluster.secret?.grantRead(migrateFn);
    const provider = deployProvider(this, 'MigrationsProvider', migrateFn);
    const migrations = new CustomResource(this, 'Migrations', {
      serviceToken: provider.serviceToken,
      resourceType: 'Custom::Migrations',
      properties: { version: migrationsVersion() },
    });
    migrations.node.addDependency(this.cluster);

    Validations.of(this.cluster).acknowledge({
      id: 'AwsSolutions::AwsSolutions-SMG4',
      reason:
        'Rotating the database secret needs a rotation function with a Secrets Manager endpoint in the isolated VPC; not set up yet (noted in the README).',
    });
  }

  /** AZs pinned so `cdk synth` needs no credentials or lookups. */
  override get availabilityZones(): string[] {
    return Token.isUnresolved(this.region)
      ? super.availabilityZones
      : [`${this.region}a`, `${this.region}b`];
  }
}

/** A digest of every migration file the bundle ships: changes when one is added. */
function migrationsVersion(): string {
  const hash = createHash('sha256');
  for (const f of readdirSync(DEFAULT_MIGRATIONS_DIR)
    .filter((x) => x.endsWith('.sql'))
    .sort()) {
    hash.update(f).update(readFileSync(join(DEFAULT_MIGRATIONS_DIR, f)));
  }
  return hash.digest('hex').slice(0, 16);
}
