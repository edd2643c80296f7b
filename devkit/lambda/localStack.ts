import {
  CloudFormationClient,
  CreateStackCommand,
  DeleteStackCommand,
  DescribeStacksCommand,
} from '@aws-sdk/client-cloudformation';
import { waitFor } from '../waitFor.js';
import { UnresolvedReferenceError } from './intrinsics.js';
import type { LocalDeployment } from './LocalDeployment.js';

/**
 * A synthesized stack's `Outputs` with every value resolved to the local stand-ins of
 * `deployment` (function names, secret ARNs, the cluster's ARN, …), `overrides` first (e.g.
 * `ApiUrl` → the local HTTP API's URL, which the template's `https://<api>.execute-api…` cannot
 * be). An output nothing local stands in for (an SNS topic's ARN) is left out and listed.
 */
export function localStackOutputs(
  deployment: LocalDeployment,
  stackName: string,
  overrides: Record<string, string> = {},
): { outputs: Record<string, string>; unresolved: string[] } {
  const stack = deployment.assembly.stacks.find((s) => s.stackName === stackName);
  if (!stack) {
    throw new Error(
      `no stack ${stackName} (has: ${deployment.assembly.stacks.map((s) => s.stackName).join(', ')})`,
    );
  }
  const outputs: Record<string, string> = {};
  const unresolved: string[] = [];
  for (const [key, output] of Object.entries(stack.template.Outputs ?? {})) {
    if (overrides[key] !== undefined) {
      outputs[key] = overrides[key];
      continue;
    }
    try {
      outputs[key] = String(deployment.resolve(stack, output.Value, `Outputs.${key}`));
    } catch (err) {
      if (!(err instanceof UnresolvedReferenceError)) throw err;
      unresolved.push(key);
    }
  }
  return { outputs, unresolved };
}

export interface PublishedStack {
  stackName: string;
  delete(): Promise<void>;
}

/**
 * Creates a stack named `stackName` in a CloudFormation endpoint (moto_server) whose outputs are
 * `outputs`, so that tooling that reads a deployment's outputs (`DescribeStacks`) finds the local
 * stand-ins. The stack holds one resource (`AWS::CloudFormation::WaitConditionHandle`, which
 * creates nothing): only its outputs matter.
 */
export async function publishStackOutputs(options: {
  endpoint: string;
  stackName: string;
  outputs: Record<string, string>;
}): Promise<PublishedStack> {
  const client = () =>
    new CloudFormationClient({
      region: 'us-east-1',
      endpoint: options.endpoint,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
  const cfn = client();
  const template = {
    Resources: { Placeholder: { Type: 'AWS::CloudFormation::WaitConditionHandle' } },
    Outputs: Object.fromEntries(
      Object.entries(options.outputs).map(([key, value]) => [key, { Value: value }]),
    ),
  };
  try {
    await cfn.send(
      new CreateStackCommand({
        StackName: options.stackName,
        TemplateBody: JSON.stringify(template),
      }),
    );
    await waitFor(
      async () => {
        const { Stacks } = await cfn.send(
          new DescribeStacksCommand({ StackName: options.stackName }),
        );
        const status = Stacks?.[0]?.StackStatus ?? '';
        if (status !== 'CREATE_COMPLETE' && !status.endsWith('_IN_PROGRESS')) {
          throw new Error(`stack ${options.stackName}: ${status || 'not found'}`);
        }
        return status === 'CREATE_COMPLETE';
      },
      { timeoutMs: 30_000, message: `stack ${options.stackName} created` },
    );
  } finally {
    cfn.destroy();
  }
  return {
    stackName: options.stackName,
    delete: async () => {
      const cfn = client();
      try {
        await cfn.send(new DeleteStackCommand({ StackName: options.stackName }));
      } finally {
        cfn.destroy();
      }
    },
  };
}
