import { RemovalPolicy } from 'aws-cdk-lib';
import { FlowLogDestination, type Vpc } from 'aws-cdk-lib/aws-ec2';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';

/**
 * VPC flow logs into a log group with a retention that `cdk destroy` deletes (CDK's default
 * flow-log group is retained for ever and keeps billing its storage after the stack is gone).
 */
export function addFlowLogs(vpc: Vpc): void {
  const logGroup = new LogGroup(vpc, 'FlowLogsGroup', {
    retention: RetentionDays.ONE_MONTH,
    removalPolicy: RemovalPolicy.DESTROY,
  });
  vpc.addFlowLog('FlowLogs', { destination: FlowLogDestination.toCloudWatchLogs(logGroup) });
}
