import {
  CreateTopicCommand,
  DeleteTopicCommand,
  type SNSClient,
  SubscribeCommand,
} from '@aws-sdk/client-sns';
import { createSnsClient } from '../../shared/transport/sqs/index.js';
import type { DeployedAssembly } from './assembly.js';
import type { Resolve } from './localReferences.js';

/** The subscription attributes a template sets that the local server is given. */
const COPIED_ATTRIBUTES = ['RawMessageDelivery', 'FilterPolicy', 'FilterPolicyScope'];

/** The SNS subscription protocols stood in for: delivery to a queue of the deployment. */
const STOOD_IN = new Set(['sqs']);

/**
 * The templates' SNS topics on the local SQS server (fauxqs serves SNS beside SQS), named with
 * `prefix`, and their subscriptions whose protocol is `sqs` (a queue of the deployment): the
 * fan-out of a stream to every subscribed queue. Other protocols (an alarm topic's e-mail) are
 * not stood in for.
 */
export class LocalTopics {
  private readonly sns: SNSClient;
  private readonly topics = new Map<string, string>();

  constructor(
    endpoint: string,
    region: string,
    private readonly prefix: string,
  ) {
    this.sns = createSnsClient({ endpoint, region });
  }

  /** Creates every topic, then every SQS subscription (the queues exist by then). */
  async create(assembly: DeployedAssembly, resolve: Resolve): Promise<void> {
    for (const { stack, logicalId, resource } of assembly.resources('AWS::SNS::Topic')) {
      const p = resource.Properties ?? {};
      const fifo = p.FifoTopic === true || p.FifoTopic === 'true';
      const { TopicArn } = await this.sns.send(
        new CreateTopicCommand({
          Name: `${this.prefix}${String(p.TopicName ?? logicalId)}`,
          ...(fifo ? { Attributes: { FifoTopic: 'true' } } : {}),
        }),
      );
      this.topics.set(`${stack.stackName}/${logicalId}`, TopicArn as string);
    }
    for (const { stack, logicalId, resource } of assembly.resources('AWS::SNS::Subscription')) {
      const p = resource.Properties ?? {};
      if (!STOOD_IN.has(String(p.Protocol))) continue;
      const attributes: Record<string, string> = {};
      for (const key of COPIED_ATTRIBUTES) {
        const value =
          p[key] === undefined ? undefined : resolve(stack, p[key], `${logicalId}.${key}`);
        if (value !== undefined) {
          attributes[key] = typeof value === 'object' ? JSON.stringify(value) : String(value);
        }
      }
      await this.sns.send(
        new SubscribeCommand({
          TopicArn: String(resolve(stack, p.TopicArn, `${logicalId}.TopicArn`)),
          Protocol: 'sqs',
          Endpoint: String(resolve(stack, p.Endpoint, `${logicalId}.Endpoint`)),
          ReturnSubscriptionArn: true,
          Attributes: attributes,
        }),
      );
    }
  }

  /** The topic standing in for a template's topic, once created. */
  of(stackName: string, logicalId: string): string | undefined {
    return this.topics.get(`${stackName}/${logicalId}`);
  }

  /** Deletes the topics it created (and so their subscriptions), then its client. */
  async delete(): Promise<void> {
    for (const arn of this.topics.values()) {
      await this.sns.send(new DeleteTopicCommand({ TopicArn: arn })).catch(() => {});
    }
    this.sns.destroy();
  }
}
