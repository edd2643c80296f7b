import { Stack, Validations } from 'aws-cdk-lib';
import type { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import { Provider } from 'aws-cdk-lib/custom-resources';
import type { Construct } from 'constructs';
import type { NodeFunction } from './NodeFunction.js';

/**
 * A CDK Provider framework around one of our functions (the `onEvent` handler of a custom resource
 * that runs on deploy), with the cdk-nag findings that framework always raises acknowledged.
 */
export function deployProvider(scope: Construct, id: string, onEvent: NodeFunction): Provider {
  const provider = new Provider(scope, id, { onEventHandler: onEvent });
  const logicalId = Stack.of(scope).getLogicalId(onEvent.node.defaultChild as CfnFunction);
  Validations.of(provider).acknowledge(
    {
      id: 'AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
      reason:
        "The CDK Provider framework's function only writes its own logs with the basic execution role.",
    },
    {
      id: `AwsSolutions::AwsSolutions-IAM5[Resource::<${logicalId}.Arn>:*]`,
      reason: `The Provider framework invokes any version of ${onEvent.node.id} (its own ARN with a version suffix).`,
    },
  );
  return provider;
}
