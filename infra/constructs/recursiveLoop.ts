import type {
  CfnFunction,
  Function as LambdaFunction,
  RecursiveLoop,
} from 'aws-cdk-lib/aws-lambda';

/**
 * Sets Lambda's recursive loop detection on functions of the relay's chain (docs/aws-facts.md,
 * "Lambda"): Lambda follows a chain of invocations through SQS, SNS, S3 and Lambda itself (the AWS
 * SDK carries its lineage in the trace header) and stops the next invocation of a function invoked
 * about 16 times in one chain. On SQS the chain of the pipeline never ends while orders flow
 * (relay → `inventory-orders` → reserve → kick → relay → …), so its functions allow it; on Amazon
 * MQ the relay publishes over AMQP, outside what Lambda follows, and the default (terminate) is
 * kept, set explicitly.
 */
export function recursiveLoop(setting: RecursiveLoop, functions: LambdaFunction[]): void {
  for (const fn of functions) (fn.node.defaultChild as CfnFunction).recursiveLoop = setting;
}
