import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  SetQueueAttributesCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { Retention, RetryBudget } from '../../config/budget.js';
import { SQS_DEFAULTS, type SqsQueueNames } from './constants.js';

export interface SqsQueueSettings {
  /** Visibility timeout of the source queue (s); must be ≥ 6 × the consumer function's timeout. */
  visibilityTimeoutSeconds: number;
  /** Source retention (s). */
  retentionSeconds: number;
  /**
   * Receives before SQS itself moves a message to parking: the safety net above the
   * application's own budget (which parks first, with a diagnosis).
   */
  maxReceiveCount: number;
}

/** The safety net fires only after the application's budget is spent (+2 for crashes). */
export function defaultSqsQueueSettings(budget: RetryBudget): SqsQueueSettings {
  return {
    visibilityTimeoutSeconds: SQS_DEFAULTS.visibilityTimeoutSeconds,
    retentionSeconds: SQS_DEFAULTS.retentionSeconds,
    maxReceiveCount: budget.maxAttempts + SQS_DEFAULTS.receivesAboveBudget,
  };
}

export interface SqsQueues {
  sourceUrl: string;
  sourceArn: string;
  parkingUrl: string;
  parkingArn: string;
}

/** Creates a queue with these attributes, or updates them when it exists. */
export async function ensureQueue(
  client: SQSClient,
  name: string,
  attributes: Record<string, string>,
): Promise<string> {
  try {
    const out = await client.send(
      new CreateQueueCommand({ QueueName: name, Attributes: attributes }),
    );
    return out.QueueUrl as string;
  } catch (err) {
    // Exists with other attributes (an older deploy): update what can be updated.
    if (
      (err as { name?: string }).name !== 'QueueAlreadyExists' &&
      !/already exists/i.test((err as Error).message)
    ) {
      throw err;
    }
    const { QueueUrl } = await client.send(new GetQueueUrlCommand({ QueueName: name }));
    const { FifoQueue: _f, ...mutable } = attributes;
    await client.send(new SetQueueAttributesCommand({ QueueUrl, Attributes: mutable }));
    return QueueUrl as string;
  }
}

async function arnOf(client: SQSClient, url: string): Promise<string> {
  const out = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }),
  );
  return out.Attributes?.QueueArn as string;
}

/**
 * Creates (or updates) the parking queue, then the source queue with its RedrivePolicy to it.
 * Idempotent. Parking keeps messages longer than the source (on a standard queue a message keeps
 * its original enqueue time when dead-lettered).
 */
export async function ensureSqsQueues(
  client: SQSClient,
  names: SqsQueueNames,
  retention: Retention,
  settings: SqsQueueSettings,
): Promise<SqsQueues> {
  const fifo: Record<string, string> = names.fifo ? { FifoQueue: 'true' } : {};
  const parkingSeconds = Math.min(1_209_600, Math.floor(retention.parkingMs / 1000));
  if (parkingSeconds <= settings.retentionSeconds) {
    throw new Error(
      `parking retention (${parkingSeconds} s) must exceed the source retention (${settings.retentionSeconds} s)`,
    );
  }
  const parkingUrl = await ensureQueue(client, names.parking, {
    ...fifo,
    MessageRetentionPeriod: String(parkingSeconds),
  });
  const parkingArn = await arnOf(client, parkingUrl);
  const sourceUrl = await ensureQueue(client, names.source, {
    ...fifo,
    VisibilityTimeout: String(settings.visibilityTimeoutSeconds),
    MessageRetentionPeriod: String(settings.retentionSeconds),
    RedrivePolicy: JSON.stringify({
      deadLetterTargetArn: parkingArn,
      maxReceiveCount: settings.maxReceiveCount,
    }),
  });
  const sourceArn = await arnOf(client, sourceUrl);
  // Only our source queue may dead-letter into parking.
  await client
    .send(
      new SetQueueAttributesCommand({
        QueueUrl: parkingUrl,
        Attributes: {
          RedriveAllowPolicy: JSON.stringify({
            redrivePermission: 'byQueue',
            sourceQueueArns: [sourceArn],
          }),
        },
      }),
    )
    .catch(() => {}); // not every emulator knows RedriveAllowPolicy
  return { sourceUrl, sourceArn, parkingUrl, parkingArn };
}
