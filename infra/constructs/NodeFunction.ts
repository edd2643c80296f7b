import { existsSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
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

/** Private subnets (with egress) and a security group: for a function that talks to a broker. */
export interface FunctionNetwork {
  /** The function runs in its private subnets with egress. */
  vpc: IVpc;
  securityGroup: ISecurityGroup;
}

/** Your handler's module (or this repository's function), its timeout, environment and network. */
export interface NodeFunctionProps {
  /**
   * The handler's module: an absolute path to a TypeScript or JavaScript file exporting `handler`.
   * Either this or `name`.
   */
  entry?: string;
  /**
   * A folder under this repository's `functions/` whose `index.ts` exports `handler` (the package
   * ships none: pass `entry`). Also the default service name.
   */
  name?: string;
  /** `POWERTOOLS_SERVICE_NAME` (default: `name`, else the construct's id). */
  serviceName?: string;
  /** The function's timeout (its transactions' deadline is derived from it). */
  timeoutSeconds: number;
  /** The runtime configuration, from `functionEnvironment()`: only variables the schema reads. */
  environment?: FunctionEnvironment;
  /** MB (default 512). */
  memorySize?: number;
  /**
   * Folders whose `*.sql` files the bundle ships in `/var/task/migrations` (`MIGRATIONS_DIR`): the
   * migrate function's. A file name present in two of them fails the synth.
   */
  migrations?: readonly string[];
  /** Run in these private subnets (functions that talk to a private Amazon MQ broker). */
  network?: FunctionNetwork;
}

/** Read by Node.js and Powertools, not by the configuration schema. */
const PLATFORM_ENVIRONMENT = (serviceName: string) => ({
  NODE_OPTIONS: '--enable-source-maps',
  POWERTOOLS_SERVICE_NAME: serviceName,
  POWERTOOLS_LOG_LEVEL: 'INFO',
});

/** Where the bundle ships the migrations (`migrations`). */
const BUNDLED_MIGRATIONS_DIR = '/var/task/migrations';

/**
 * A Lambda function of the pipeline: Node.js 24 on arm64, an ESM bundle built by the local esbuild
 * (no Docker), minified with source maps, its own log group with a retention (`<id>Logs`, beside
 * it in `scope`), Powertools settings. The AWS SDK v3 comes with the runtime and is left out of the
 * bundle. The handler is a module of yours (`entry`) or a folder of this repository (`name`).
 */
export class NodeFunction extends NodejsFunction {
  constructor(scope: Construct, id: string, props: NodeFunctionProps) {
    const entry = handlerEntry(props);
    const migrations = props.migrations ?? [];
    const logGroup = new LogGroup(scope, `${id}Logs`, {
      retention: RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    super(scope, id, {
      entry,
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
        ...PLATFORM_ENVIRONMENT(props.serviceName ?? props.name ?? id),
        ...(migrations.length > 0
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
        ...(migrations.length > 0
          ? {
              commandHooks: {
                beforeBundling: () => [],
                beforeInstall: () => [],
                afterBundling: (_input: string, output: string) => [
                  [
                    `mkdir -p "${output}/migrations"`,
                    ...migrations.map((dir) => `cp "${dir}"/*.sql "${output}/migrations/"`),
                  ].join(' && '),
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

/**
 * `props.entry`, or `functions/<name>/index.ts` in the nearest folder above this module that has
 * it, within its package (the folder with the nearest `package.json`): this repository's.
 */
function handlerEntry(props: NodeFunctionProps): string {
  if (props.entry !== undefined) {
    if (!isAbsolute(props.entry) || !existsSync(props.entry)) {
      throw new Error(`NodeFunction: entry ${props.entry}: not an absolute path to a file`);
    }
    return props.entry;
  }
  if (props.name === undefined) throw new Error('NodeFunction: pass `entry` (or `name`)');
  const here = dirname(fileURLToPath(import.meta.url));
  for (let dir = here; ; dir = dirname(dir)) {
    const entry = join(dir, 'functions', props.name, 'index.ts');
    if (existsSync(entry)) return entry;
    if (existsSync(join(dir, 'package.json')) || dirname(dir) === dir) {
      throw new Error(
        `NodeFunction: no functions/${props.name}/index.ts in ${dir}: pass \`entry\`, the path of your handler's module`,
      );
    }
  }
}

function definedOnly(env: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined),
  );
}
