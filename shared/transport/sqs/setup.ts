import { CreateQueueCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { Retention, RetryBudget } from '../../config/budget.js';
import { SQS_NAMES, sqsQueueNames } from './names.js';
import { defaultSqsQueueSettings, ensureSqsQueues, type SqsQueues } from './queues.js';

export interface SqsPipelineQueues extends SqsQueues {
  /** Where the relay sends inventory results (from inventory_outbox). */
  resultsUrl: string;
}

/** Every queue of the local SQS pipeline (idempotent). */
export async function ensureSqsPipeline(
  client: SQSClient,
  options: {
    prefix: string;
    budget: RetryBudget;
    retention: Retention;
    visibilityTimeoutSeconds: number;
    fifo?: boolean;
  },
): Promise<SqsPipelineQueues> {
  const queues = await ensureSqsQueues(
    client,
    sqsQueueNames(options.prefix, options.fifo),
    options.retention,
    {
      ...defaultSqsQueueSettings(options.budget),
      visibilityTimeoutSeconds: options.visibilityTimeoutSeconds,
    },
  );
  const { QueueUrl } = await client.send(
    new CreateQueueCommand({ QueueName: `${options.prefix}${SQS_NAMES.inventoryResultsQueue}` }),
  );
  return { ...queues, resultsUrl: QueueUrl as string };
}
