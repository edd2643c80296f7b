import type { SqsRetryMode } from '../shared/transport/sqs/index.js';

/**
 * The transport configurations the lab compares. Each one runs the same use case
 * (`ReserveInventory`) behind a different delivery mechanism.
 */
export const CONFIGURATION_IDS = [
  'rabbitmq-worker',
  'rabbitmq-amazonmq',
  'sqs-visibility',
  'sqs-resend',
  'sqs-fifo',
] as const;
export type ConfigurationId = (typeof CONFIGURATION_IDS)[number];

export interface Configuration {
  id: ConfigurationId;
  /** Column header in the reports. */
  label: string;
  /** Lane name in the timelines. */
  short: string;
  transport: 'rabbitmq' | 'sqs';
  consumer: 'worker' | 'amazonmq-trigger' | 'sqs-trigger';
  sqsMode?: SqsRetryMode;
  fifo?: boolean;
  /** How a processed message is acknowledged. */
  ack: string;
  /** How "retry later" is done, in one line. */
  retry: string;
  /** What happens to a delivery whose consumer dies or throws before settling it. */
  unsettled: string;
}

export const CONFIGURATIONS: Record<ConfigurationId, Configuration> = {
  'rabbitmq-worker': {
    id: 'rabbitmq-worker',
    short: 'RabbitMQ worker',
    label: 'RabbitMQ worker',
    transport: 'rabbitmq',
    consumer: 'worker',
    ack: 'basic.ack after COMMIT',
    retry:
      'confirmed copy to a TTL retry queue per delay, dead-lettered back to inventory.orders only',
    unsettled: 'channel closed, the broker redelivers at once (redelivered=true)',
  },
  'rabbitmq-amazonmq': {
    id: 'rabbitmq-amazonmq',
    short: 'Amazon MQ trigger',
    label: 'RabbitMQ · Amazon MQ trigger',
    transport: 'rabbitmq',
    consumer: 'amazonmq-trigger',
    ack: 'the invocation returns: the mapping acks the whole batch',
    retry:
      'the same confirmed retry copy, published inside the invocation (no partial batch response)',
    unsettled:
      'the invocation throws, the whole batch is requeued (emulated: AWS does not document it) after a backoff',
  },
  'sqs-visibility': {
    id: 'sqs-visibility',
    short: 'SQS visibility',
    label: 'SQS visibility',
    transport: 'sqs',
    consumer: 'sqs-trigger',
    sqsMode: 'visibility',
    ack: 'not in batchItemFailures: the mapping deletes it',
    retry:
      'ChangeMessageVisibility to the ladder delay and report the record failed: the same message comes back',
    unsettled: 'not deleted: visible again when its visibility timeout expires',
  },
  'sqs-resend': {
    id: 'sqs-resend',
    short: 'SQS resend',
    label: 'SQS resend',
    transport: 'sqs',
    consumer: 'sqs-trigger',
    sqsMode: 'resend',
    ack: 'not in batchItemFailures: the mapping deletes it',
    retry: 'a copy with DelaySeconds (≤ 900 s) and retry_attempt+1, then the original is deleted',
    unsettled: 'not deleted: visible again when its visibility timeout expires',
  },
  'sqs-fifo': {
    id: 'sqs-fifo',
    short: 'SQS FIFO',
    label: 'SQS FIFO',
    transport: 'sqs',
    consumer: 'sqs-trigger',
    sqsMode: 'visibility',
    fifo: true,
    ack: 'not in batchItemFailures: the mapping deletes it',
    retry: 'visibility change; the rest of the message group waits behind the failed record',
    unsettled: 'the whole group waits until the record is visible again',
  },
};

/** Parses a comma list of configuration ids (all when empty). */
export function parseConfigurations(list: string | undefined): Configuration[] {
  if (!list) return CONFIGURATION_IDS.map((id) => CONFIGURATIONS[id]);
  return list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((id) => {
      const c = CONFIGURATIONS[id as ConfigurationId];
      if (!c) {
        throw new Error(`unknown configuration "${id}" (known: ${CONFIGURATION_IDS.join(', ')})`);
      }
      return c;
    });
}
