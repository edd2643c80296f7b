import { join } from 'node:path';
import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import { type ISecurityGroup, type IVpc, SubnetType } from 'aws-cdk-lib/aws-ec2';
import { Architecture, Runtime } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import {
  type FunctionEnvironment,
  functionEnvironment,
} from '../../shared/config/functionEnvironment.js';
import { MIGRATIONS_SOURCE, ROOT } from '../paths.js';

export interface NodeFunctionProps {
  /** Folder under `functions/` whose `index.ts` exports `handler`. */
  name: string;
  timeoutSeconds: number;
  /** The runtime configuration, from `functionEnvironment()`: only variables the schema reads. */
  environment?: FunctionEnvironment;
  memorySize?: number;
  /** Ship `shared/db/migrations/*.sql` in the bundle (the migrate function reads them). */
  withMigrations?: boolean;
  /** Run in these private subnets (functions that talk to a private Amazon MQ broker). */
  network?: { vpc: IVpc; securityGroup: ISecurityGroup };
}

/** Read by Node.js and Powertools, not by the configuration schema. */
const PLATFORM_ENVIRONMENT = (name: string) => ({
  NODE_OPTIONS: '--enable-source-maps',
  POWERTOOLS_SERVICE_NAME: name,
  POWERTOOLS_LOG_LEVEL: 'INFO',
});

/** Where the bundle ships the migrations (`withMigrations`). */
const BUNDLED_MIGRATIONS_DIR = '/var/task/migrations';

/**
 * Every function of the project: Node.js 24 on arm64, an ESM bundle built by the local esbuild
 * (no Docker), minified with source maps, its own log group with a retention, Powertools settings.
 * The AWS SDK v3 comes with the runtime and is left out of the bundle.
 */
export class NodeFunction extends NodejsFunction {
  constructor(scope: Construct, id: string, props: NodeFunctionProps) {
    const logGroup = new LogGroup(scope, `${id}Logs`, {
      retention: RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    super(scope, id, {
      entry: join(ROOT, 'functions', props.name, 'index.ts'),
      handler: 'handler',
      runtime: Runtime.NODEJS_24_X,
      architecture: Architecture.ARM_64,
      timeout: Duration.seconds(props.timeoutSeconds),
      memorySize: props.memorySize ?? 512,
      logGroup,
      ...(props.network
        ? {
            vpc: props.network.vpc,
            vpcSubnets: { subnetType: SubnetType.PRIVATE_WITH_EGRESS },
            securityGroups: [props.network.securityGroup],
          }
        : {}),
      environment: definedOnly({
        ...PLATFORM_ENVIRONMENT(props.name),
        ...(props.withMigrations
          ? functionEnvironment({ migrationsDir: BUNDLED_MIGRATIONS_DIR })
          : {}),
        ...props.environment,
        // the function's real timeout: its transaction bounds are derived from it (never the
        // runtime's 5 s default), and the SQS consumers' visibility rule is checked against it
        ...functionEnvironment({ functionTimeoutMs: props.timeoutSeconds * 1000 }),
      }),
      bundling: {
        format: OutputFormat.ESM,
        minify: true,
        sourceMap: true,
        target: 'node24',
        mainFields: ['module', 'main'],
        externalModules: ['@aws-sdk/*'],
        // ESM bundles of CommonJS dependencies need `require`
        banner: "import{createRequire}from'module';const require=createRequire(import.meta.url);",
        ...(props.withMigrations
          ? {
              commandHooks: {
                beforeBundling: () => [],
                beforeInstall: () => [],
                afterBundling: (_input: string, output: string) => [
                  `mkdir -p "${output}/migrations" && cp "${MIGRATIONS_SOURCE}"/*.sql "${output}/migrations/"`,
                ],
              },
            }
          : {}),
      },
    });
    Validations.of(this).acknowledge({
      id: 'AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
      reason:
        'The basic execution role only lets the function write to CloudWatch Logs (its own log group).',
    });
    if (props.network) {
      Validations.of(this).acknowledge({
        id: 'AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]',
        reason:
          'A function in a VPC needs to create and delete its network interfaces; this managed policy grants only that.',
      });
    }
  }
}

function definedOnly(env: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined),
  );
}
