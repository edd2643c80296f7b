import { RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import {
  Architecture,
  type CfnFunction,
  type Function as LambdaFunction,
} from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Provider } from 'aws-cdk-lib/custom-resources';
import type { Construct } from 'constructs';
import type { NodeFunction } from './NodeFunction.js';

/**
 * A CDK Provider framework around one of our functions (the `onEvent` handler of a custom resource
 * that runs on deploy), with the cdk-nag findings that framework always raises acknowledged.
 *
 * Like every function of the project, the framework's own function runs on arm64 (its code is
 * plain Node.js; `Provider` has no architecture option, so the property is set on its
 * CfnFunction) and logs into a log group with a retention that `cdk destroy` deletes (without
 * one, Lambda creates `/aws/lambda/<name>`, kept for ever after the stack is gone).
 */
export function deployProvider(scope: Construct, id: string, onEvent: NodeFunction): Provider {
  const logGroup = new LogGroup(scope, `${id}Logs`, {
    retention: RetentionDays.ONE_MONTH,
    removalPolicy: RemovalPolicy.DESTROY,
  });
  const provider = new Provider(scope, id, { onEventHandler: onEvent, logGroup });
  const framework = provider.node.findChild('framework-onEvent') as LambdaFunction;
  (framework.node.defaultChild as CfnFunction).architectures = [Architecture.ARM_64.name];
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
