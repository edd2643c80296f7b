import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { Option } from 'commander';
import {
  DATABASE_LOGIN_OUTPUTS,
  type DatabaseLogin,
  STACK_OUTPUTS,
} from '../../infra/stackOutputs.js';
import { loadEnv, transactionTimeoutsOf } from '../../shared/config/env.js';
import { DataApiDatabase } from '../../shared/db/data-api/DataApiDatabase.js';
import type { Service } from '../../shared/pipeline/schema.js';

/**
 * A deployment the CLI reaches with the operator's AWS credentials (the SDK's default chain) and
 * region (`AWS_REGION` or the profile's): its pipeline stack's outputs from CloudFormation, the
 * database through the RDS Data API, the relay through Lambda, the HTTP API signed with SigV4.
 * Every AWS client honours `AWS_ENDPOINT_URL_<SERVICE>` (docs/cli.md).
 */
export interface DeployedStack {
  name: string;
  region: string;
  status: string;
  outputs: Record<string, string>;
}

/** What stops a command before it did anything (no such stack, no credentials, …): exit 2. */
export class OperatorError extends Error {
  override name = 'OperatorError';
}

/** `--stack <name>`, on every command that reaches a deployment. */
export const stackOption = () =>
  new Option(
    '--stack <name>',
    'a deployed pipeline stack (e.g. ReliableMessagingSqs), reached with your AWS credentials and region (docs/cli.md)',
  );

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The stack's outputs (DescribeStacks); a missing stack, region or credentials → `OperatorError`. */
export async function describeStack(name: string): Promise<DeployedStack> {
  const cfn = new CloudFormationClient({});
  try {
    let region: string;
    try {
      region = await cfn.config.region();
    } catch (err) {
      throw new OperatorError(
        `--stack ${name}: no AWS region (set AWS_REGION, or a region in your profile): ${messageOf(err)}`,
      );
    }
    try {
      const out = await cfn.send(new DescribeStacksCommand({ StackName: name }));
      const stack = out.Stacks?.[0];
      if (!stack) throw new OperatorError(`stack ${name} does not exist in ${region}`);
      return {
        name,
        region,
        status: String(stack.StackStatus ?? 'unknown'),
        outputs: Object.fromEntries(
          (stack.Outputs ?? []).map((o) => [String(o.OutputKey), String(o.OutputValue ?? '')]),
        ),
      };
    } catch (err) {
      if (err instanceof OperatorError) throw err;
      const e = err as { name?: string };
      if (e.name === 'CredentialsProviderError') {
        throw new OperatorError(
          `--stack ${name}: no AWS credentials (the SDK's default chain: environment, profile, SSO, instance role): ${messageOf(err)}`,
        );
      }
      if (e.name === 'ValidationError' && /does not exist/i.test(messageOf(err))) {
        throw new OperatorError(`stack ${name} does not exist in ${region}`);
      }
      throw new OperatorError(
        `stack ${name} in ${region}: cloudformation:DescribeStacks failed: ${e.name ?? 'Error'}: ${messageOf(err)}`,
      );
    }
  } finally {
    cfn.destroy();
  }
}

/** An output of the stack; a missing one → `OperatorError` naming it. */
export function outputOf(stack: DeployedStack, key: string): string {
  const value = stack.outputs[key];
  if (!value) {
    throw new OperatorError(
      `stack ${stack.name} (${stack.status}, ${stack.region}) has no output ${key}: is it a pipeline stack of this version? (redeploy it)`,
    );
  }
  return value;
}

/**
 * A service's database of the stack through the Data API, as `login` (the side whose tables the
 * command reads or changes): the cluster and the service's database from the outputs (each
 * service owns a database in the one cluster), and that side's secret, which the Data
 * API reads on the caller's behalf (so the caller needs `secretsmanager:GetSecretValue` on it).
 * Every transaction is bounded as the functions' are, so an interrupted command leaves no locks
 * for the service's 3-minute expiry.
 */
export function stackDatabase(
  stack: DeployedStack,
  login: DatabaseLogin,
  service: Service,
): { db: DataApiDatabase; close(): void } {
  const options = {
    resourceArn: outputOf(stack, STACK_OUTPUTS.databaseClusterArn),
    database: outputOf(
      stack,
      service === 'orders' ? STACK_OUTPUTS.databaseName : STACK_OUTPUTS.inventoryDatabaseName,
    ),
    secretArn: outputOf(stack, DATABASE_LOGIN_OUTPUTS[login]),
  };
  const client = new RDSDataClient({ region: stack.region });
  const db = new DataApiDatabase({ client }, options, {
    transactionTimeouts: transactionTimeoutsOf(loadEnv()),
  });
  return { db, close: () => client.destroy() };
}
