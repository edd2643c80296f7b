import type { DeployedAssembly } from './assembly.js';
import {
  type CfnResource,
  type LocalReferences,
  resolveValue,
  type StackScope,
} from './intrinsics.js';

/** The account every local ARN names. */
export const LOCAL_ACCOUNT = '000000000000';

/** The local value of a template value (throws `UnresolvedReferenceError`). */
export type Resolve = (stack: StackScope, value: unknown, path?: string) => unknown;

/** A local queue standing in for a template's `AWS::SQS::Queue`. */
export interface LocalQueue {
  url: string;
  arn: string;
  name: string;
}

/** What the deployment's resources are called locally, once created (undefined before). */
export interface LocalNames {
  queue(stackName: string, logicalId: string): LocalQueue | undefined;
  topicArn(stackName: string, logicalId: string): string | undefined;
  secretArn(stackName: string, logicalId: string): string | undefined;
  parameterName(stackName: string, logicalId: string): string | undefined;
}

/**
 * How a deployment's template values resolve locally: `Ref` and `Fn::GetAtt` of its queues,
 * secrets and parameters to their local stand-ins, of its broker to the local broker, of its
 * functions, cluster and rules to local names and ARNs.
 */
export class LocalResolver {
  private readonly references: LocalReferences;

  constructor(
    private readonly assembly: DeployedAssembly,
    private readonly region: string,
    private readonly broker: { amqpUrl: string; managementUrl: string },
    private readonly names: LocalNames,
  ) {
    this.references = {
      pseudo: {
        'AWS::Region': region,
        'AWS::AccountId': LOCAL_ACCOUNT,
        'AWS::Partition': 'aws',
        'AWS::URLSuffix': 'amazonaws.com',
      },
      stacks: assembly.stacks,
      ref: (stack, logicalId, resource) => this.ref(stack, logicalId, resource),
      getAtt: (stack, logicalId, attribute, resource) =>
        this.getAtt(stack, logicalId, attribute, resource),
    };
  }

  /** The local value of a template value (throws `UnresolvedReferenceError`). */
  readonly resolve: Resolve = (stack, value, path = 'value') =>
    resolveValue(value, stack, this.references, path);

  private ref(stack: StackScope, logicalId: string, resource: CfnResource): string | undefined {
    switch (resource.Type) {
      case 'AWS::SQS::Queue':
        return this.names.queue(stack.stackName, logicalId)?.url;
      case 'AWS::SNS::Topic':
        return this.names.topicArn(stack.stackName, logicalId);
      case 'AWS::SecretsManager::Secret':
        return this.names.secretArn(stack.stackName, logicalId);
      case 'AWS::SSM::Parameter':
        return this.names.parameterName(stack.stackName, logicalId);
      case 'AWS::SecretsManager::SecretTargetAttachment':
        return String(this.resolve(stack, resource.Properties?.SecretId, `${logicalId}.SecretId`));
      case 'AWS::RDS::DBCluster':
        return `local-${logicalId.toLowerCase()}`;
      case 'AWS::AmazonMQ::Broker':
        return `b-local-${logicalId.toLowerCase()}`;
      case 'AWS::Lambda::Function':
        return this.functionId(stack, logicalId);
      case 'AWS::ApiGatewayV2::Integration':
      case 'AWS::ApiGatewayV2::Api':
      case 'AWS::Events::Rule':
        // their logical id
        return logicalId;
      default:
        return undefined;
    }
  }

  private getAtt(
    stack: StackScope,
    logicalId: string,
    attribute: string,
    resource: CfnResource,
  ): string | string[] | undefined {
    switch (resource.Type) {
      case 'AWS::SQS::Queue':
        return this.queueAttribute(stack, logicalId, attribute);
      case 'AWS::AmazonMQ::Broker':
        return this.brokerAttribute(stack, logicalId, attribute);
      case 'AWS::SNS::Topic':
        return attribute === 'TopicArn' || attribute === 'TopicName'
          ? attribute === 'TopicArn'
            ? this.names.topicArn(stack.stackName, logicalId)
            : this.names.topicArn(stack.stackName, logicalId)?.split(':').pop()
          : undefined;
      case 'AWS::Lambda::Function': {
        const id = attribute === 'Arn' ? this.functionId(stack, logicalId) : undefined;
        return id ? `arn:aws:lambda:${this.region}:${LOCAL_ACCOUNT}:function:${id}` : undefined;
      }
      case 'AWS::Events::Rule':
        return attribute === 'Arn'
          ? `arn:aws:events:${this.region}:${LOCAL_ACCOUNT}:rule/${logicalId}`
          : undefined;
      default:
        return undefined;
    }
  }

  private queueAttribute(stack: StackScope, logicalId: string, attribute: string) {
    const q = this.names.queue(stack.stackName, logicalId);
    if (attribute === 'Arn') return q?.arn;
    if (attribute === 'QueueName') return q?.name;
    if (attribute === 'QueueUrl') return q?.url;
    return undefined;
  }

  private brokerAttribute(stack: StackScope, logicalId: string, attribute: string) {
    if (attribute === 'AmqpEndpoints') return [originOf(this.broker.amqpUrl)];
    if (attribute === 'ConsoleURLs') return [originOf(this.broker.managementUrl)];
    if (attribute === 'Arn') {
      return `arn:aws:mq:${this.region}:${LOCAL_ACCOUNT}:broker:${stack.stackName}-broker:b-local-${logicalId.toLowerCase()}`;
    }
    return undefined;
  }

  private functionId(stack: StackScope, logicalId: string): string | undefined {
    return this.assembly.functions.find((f) => f.stack === stack && f.logicalId === logicalId)?.id;
  }
}

/** `amqp://guest:guest@host:5672/vhost` → `amqp://host:5672`. */
function originOf(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}`;
}
