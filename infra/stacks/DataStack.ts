import { Stack, type StackProps, Token, Validations } from 'aws-cdk-lib';
import { SubnetType, Vpc } from 'aws-cdk-lib/aws-ec2';
import {
  AuroraPostgresEngineVersion,
  ClusterInstance,
  Credentials,
  DatabaseCluster,
  DatabaseClusterEngine,
} from 'aws-cdk-lib/aws-rds';
import type { Construct } from 'constructs';

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
