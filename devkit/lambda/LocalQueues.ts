import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SetQueueAttributesCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { createSqsClient } from '../../shared/transport/sqs/index.js';
import type { DeployedAssembly, TemplateResource } from './assembly.js';
import type { LocalQueue, Resolve } from './localReferences.js';

/** The queue attributes a template sets that the local server is given as they are. */
const COPIED_ATTRIBUTES = [
  'VisibilityTimeout',
  'MessageRetentionPeriod',
  'DelaySeconds',
  'MaximumMessageSize',
  'ReceiveMessageWaitTimeSeconds',
  'FifoQueue',
  'ContentBasedDeduplication',
];

/**
 * The templates' queues on a local SQS server (fauxqs, moto), named with `prefix` (isolation on
 * a shared server), their URLs on `urlEndpoint` (the server, or a counting proxy in front of it).
 */
export class LocalQueues {
  private readonly sqs: SQSClient;
  private readonly queues = new Map<string, LocalQueue>();

  constructor(
    endpoint: string,
    region: string,
    private readonly prefix: string,
    private readonly urlEndpoint: string,
  ) {
    this.sqs = createSqsClient({ endpoint, region });
  }

  /** Creates every queue of the templates with its attributes, then the redrive policies. */
  async create(assembly: DeployedAssembly, resolve: Resolve): Promise<void> {
    const all = assembly.resources('AWS::SQS::Queue');
    for (const queue of all) await this.createQueue(queue);
    // redrive policies once every queue (and so every dead-letter target's ARN) exists
    for (const { stack, logicalId, resource } of all) {
      const redrive = resource.Properties?.RedrivePolicy;
      if (!redrive) continue;
      const q = this.of(stack.stackName, logicalId) as LocalQueue;
      const policy = resolve(stack, redrive, `${logicalId}.RedrivePolicy`);
      await this.sqs.send(
        new SetQueueAttributesCommand({
          QueueUrl: q.url,
          Attributes: { RedrivePolicy: JSON.stringify(policy) },
        }),
      );
    }
  }

  /** The queue standing in for a template's queue, once created. */
  of(stackName: string, logicalId: string): LocalQueue | undefined {
    return this.queues.get(`${stackName}/${logicalId}`);
  }

  /** A queue by its name in the template (`inventory-orders`). */
  named(name: string): LocalQueue | undefined {
    return [...this.queues.values()].find((x) => x.name === `${this.prefix}${name}`);
  }

  /** Deletes the queues it created (a shared local server outlives the deployment), then its client. */
  async delete(): Promise<void> {
    for (const q of this.queues.values()) {
      await this.sqs.send(new DeleteQueueCommand({ QueueUrl: q.url })).catch(() => {});
    }
    this.sqs.destroy();
  }

  private async createQueue({ stack, logicalId, resource }: TemplateResource): Promise<void> {
    const p = resource.Properties ?? {};
    const name = `${this.prefix}${String(p.QueueName ?? logicalId)}`;
    const attributes: Record<string, string> = {};
    for (const key of COPIED_ATTRIBUTES) {
      if (p[key] !== undefined) attributes[key] = String(p[key]);
    }
    const out = await this.sqs.send(
      new CreateQueueCommand({ QueueName: name, Attributes: attributes }),
    );
    // the server's own host names may not resolve (fauxqs: `sqs.<region>.127.0.0.1`): its
    // endpoint, or the counting proxy in front of it (the SDK sends to the queue URL's host)
    const path = String(out.QueueUrl).replace(/^[a-z]+:\/\/[^/]+/i, '');
    const url = `${new URL(this.urlEndpoint).origin}${path}`;
    const { Attributes } = await this.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }),
    );
    this.queues.set(`${stack.stackName}/${logicalId}`, {
      url,
      arn: Attributes?.QueueArn as string,
      name,
    });
  }
}
