import { PEER_IDS, type PeerId } from '../peers/types.js';
import type { Capabilities } from '../shared/port/types.js';
import {
  type TransportModule,
  type TransportName,
  transportModule,
} from '../shared/transport/index.js';
import type { SqsRetryMode } from '../shared/transport/sqs/constants.js';

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
  'nats-jetstream',
] as const;
export type OwnConfigurationId = (typeof CONFIGURATION_IDS)[number];
/** Ours, or a peer library doing the consumer's job (`npm start -- --peers`; peers/). */
export type ConfigurationId = OwnConfigurationId | PeerId;

export interface Configuration {
  id: ConfigurationId;
  /** Column header in the reports. */
  label: string;
  /** Lane name in the timelines. */
  short: string;
  transport: TransportName;
  consumer: 'worker' | 'amazonmq-trigger' | 'sqs-trigger' | 'peer';
  /** A peer configuration: the peer library that replaces our consumer (peers/). */
  peer?: PeerId;
  sqsMode?: SqsRetryMode;
  fifo?: boolean;
  /** How a processed message is acknowledged. */
  ack: string;
  /** How "retry later" is done, in one line. */
  retry: string;
  /** What happens to a delivery whose consumer dies or throws before settling it. */
  unsettled: string;
  /**
   * How the lab makes the broker misbehave: the SQS fault layer in front of the server (what real
   * queues do that the emulator does not), or a proxy on one client's broker connection.
   */
  brokerFaults: 'fault-layer' | 'proxy';
  /**
   * What our retry is: a confirmed copy (delay queues, a resend), or the same message delivered
   * again. Absent for the peers (their own retry, if any).
   */
  retryAs?: 'copy' | 'redelivery';
  /** Broker faults this configuration's broker cannot show, and why: their scenarios do not apply. */
  cannot?: Partial<Record<'throttle' | 'partial-publish', { reason: string; instead: string }>>;
}

/** RabbitMQ blocks a whole broker, it does not throttle requests one by one. */
const RABBITMQ_CANNOT: Configuration['cannot'] = {
  throttle: {
    reason:
      'RabbitMQ does not throttle requests one by one: it blocks every publishing connection of the broker under a memory or disk alarm (connection.blocked), a broker-wide state that would stall every run sharing it',
    instead:
      'a blocked relay gets no confirm within its timeout: the round fails and its rows are retried, as broker-down-relay shows with the broker cut',
  },
};

/** JetStream answers every client alike, and acknowledges each publish on its own. */
const NATS_CANNOT: Configuration['cannot'] = {
  throttle: {
    reason:
      'JetStream does not refuse requests one by one for rate: a server over its limits answers every client alike (slow consumers are cut, publishes time out)',
    instead:
      'a relay whose publish acks do not come gets a timeout: the round fails and its rows are retried, as broker-down-relay shows with the server cut',
  },
  'partial-publish': {
    reason:
      'JetStream acknowledges each publish on its own: there is no window or batch the server accepts in part',
    instead:
      'one failed publish is the single-message case the relay retries, as broker-down-relay and relay-killed-mid-window show',
  },
};

/** How the lab makes each transport's broker misbehave, and the faults that broker cannot show. */
const BY_TRANSPORT: Partial<Record<TransportName, Partial<Configuration>>> = {
  rabbitmq: { brokerFaults: 'proxy', cannot: RABBITMQ_CANNOT },
  sqs: { brokerFaults: 'fault-layer' },
  'nats-jetstream': { brokerFaults: 'proxy', cannot: NATS_CANNOT },
};

/** A configuration as written below: what follows from its id and its transport is filled in. */
type Entry = Omit<Configuration, 'id' | 'short' | 'peer' | 'brokerFaults' | 'cannot'> & {
  short?: string;
};

/**
 * The configurations of these entries: the short name defaults to the label; a peer consumer is
 * the peer of its id; the broker faults are its transport's.
 */
function configurations<K extends ConfigurationId>(
  entries: Record<K, Entry>,
): Record<K, Configuration> {
  const built = Object.entries<Entry>(entries).map(([id, e]): [string, Configuration] => [
    id,
    {
      id: id as K,
      short: e.label,
      ...(e.consumer === 'peer' ? { peer: id as PeerId } : {}),
      brokerFaults: 'proxy',
      ...BY_TRANSPORT[e.transport],
      ...e,
    },
  ]);
  return Object.fromEntries(built) as Record<K, Configuration>;
}

const OWN_CONFIGURATIONS = configurations<OwnConfigurationId>({
  'rabbitmq-worker': {
    retryAs: 'copy',
    label: 'RabbitMQ worker',
    transport: 'rabbitmq',
    consumer: 'worker',
    ack: 'basic.ack after COMMIT',
    retry:
      'confirmed copy to a TTL retry queue per delay, dead-lettered back to inventory.orders only',
    unsettled: 'channel closed, the broker redelivers at once (redelivered=true)',
  },
  'rabbitmq-amazonmq': {
    retryAs: 'copy',
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
    retryAs: 'redelivery',
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
    retryAs: 'copy',
    label: 'SQS resend',
    transport: 'sqs',
    consumer: 'sqs-trigger',
    sqsMode: 'resend',
    ack: 'not in batchItemFailures: the mapping deletes it',
    retry: 'a copy with DelaySeconds (≤ 900 s) and retry_attempt+1, then the original is deleted',
    unsettled: 'not deleted: visible again when its visibility timeout expires',
  },
  'sqs-fifo': {
    retryAs: 'redelivery',
    label: 'SQS FIFO',
    transport: 'sqs',
    consumer: 'sqs-trigger',
    sqsMode: 'visibility',
    fifo: true,
    ack: 'not in batchItemFailures: the mapping deletes it',
    retry: 'visibility change; the rest of the message group waits behind the failed record',
    unsettled: 'the whole group waits until the record is visible again',
  },
  'nats-jetstream': {
    retryAs: 'redelivery',
    label: 'NATS JetStream',
    transport: 'nats-jetstream',
    consumer: 'worker',
    ack: 'AckAck (a confirmed ack) after COMMIT',
    retry:
      'nak with the ladder delay: the same message comes back, its attempt from the delivery count',
    unsettled:
      'not acknowledged within AckWait, or nak on a give-back: delivered again (redelivered)',
  },
});

/**
 * The peers: our producer side (the order API, the outbox, our relay) publishing to the peer's
 * own queue, the peer consuming it with the handler its user would write (peers/effect.ts). How
 * each is set up, with the doc sections followed, is in peers/*.ts and docs/peers.md.
 */
const PEER_CONFIGURATIONS = configurations<PeerId>({
  'peer-powertools': {
    short: 'Powertools',
    label: 'peer: Powertools batch + idempotency (SQS trigger)',
    transport: 'sqs',
    consumer: 'peer',
    ack: 'not in batchItemFailures: the mapping deletes it',
    retry:
      'none of its own: the record is reported failed and comes back after its visibility timeout',
    unsettled: 'not deleted: visible again when its visibility timeout expires',
  },
  'peer-sqs-consumer': {
    short: 'sqs-consumer',
    label: 'peer: sqs-consumer',
    transport: 'sqs',
    consumer: 'peer',
    ack: 'DeleteMessage after the handler resolves',
    retry: 'none of its own: a failed message comes back after its visibility timeout',
    unsettled: 'not deleted: visible again when its visibility timeout expires',
  },
  'peer-mqt-sqs': {
    short: 'MQT SQS',
    label: 'peer: message-queue-toolkit SQS',
    transport: 'sqs',
    consumer: 'peer',
    ack: 'DeleteMessage after the handler resolves',
    retry: "the toolkit's own retry (see peers/mqtSqs.ts)",
    unsettled: 'not deleted: visible again when its visibility timeout expires',
  },
  'peer-mqt-amqp': {
    short: 'MQT AMQP',
    label: 'peer: message-queue-toolkit AMQP',
    transport: 'rabbitmq',
    consumer: 'peer',
    ack: 'basic.ack after the handler resolves',
    retry: "the toolkit's own retry (see peers/mqtAmqp.ts)",
    unsettled: 'channel closed, the broker redelivers at once',
  },
  'peer-pg-transactional-outbox': {
    short: 'pg-transactional-outbox',
    label: 'peer: pg-transactional-outbox inbox',
    transport: 'rabbitmq',
    consumer: 'peer',
    ack: 'basic.ack once the message is stored in its inbox table',
    retry: "its inbox listener's retry strategy (see peers/pgTransactionalOutbox.ts)",
    unsettled: 'channel closed, the broker redelivers at once; the inbox row absorbs the copy',
  },
});

export const CONFIGURATIONS: Record<ConfigurationId, Configuration> = {
  ...OWN_CONFIGURATIONS,
  ...PEER_CONFIGURATIONS,
};

/** Every known configuration id: ours first, then the peers. */
export const ALL_CONFIGURATION_IDS: readonly ConfigurationId[] = [
  ...CONFIGURATION_IDS,
  ...PEER_IDS,
];

/** The peer configurations (`npm start -- --peers`). */
export const PEER_CONFIGURATION_LIST: Configuration[] = PEER_IDS.map(
  (id) => PEER_CONFIGURATIONS[id],
);

/** The broker each transport ran on in the lab, and its key in the run's versions. */
export const BROKERS: Partial<Record<TransportName, { name: string; version: string }>> = {
  rabbitmq: { name: 'RabbitMQ', version: 'rabbitmq' },
  sqs: { name: 'fauxqs', version: 'fauxqs' },
  'nats-jetstream': { name: 'NATS', version: 'nats' },
};

/** What the configuration's backend can do, as its transport module declares it. */
export function capabilitiesOf(c: Configuration): Capabilities {
  const module: TransportModule = transportModule(c.transport as string);
  return module.capabilitiesOf?.({ fifo: c.fifo, mode: c.sqsMode }) ?? module.capabilities;
}

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
        throw new Error(
          `unknown configuration "${id}" (known: ${ALL_CONFIGURATION_IDS.join(', ')})`,
        );
      }
      return c;
    });
}
