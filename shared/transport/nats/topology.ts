import {
  AckPolicy,
  type ConsumerConfig,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { Stream, Subscription, Topology } from '../../port/types.js';
import { NATS_NAMES } from './constants.js';

/** A durable pull consumer, the stream it reads and where its parked copies go. */
export interface ConsumerNames {
  stream: string;
  name: string;
  filter: string;
  parkingSubject: string;
  failures: Subscription['failures'];
}

/** Every name of the backend under one prefix. */
export interface NatsNames {
  streams: Record<Stream, { stream: string; subjectRoot: string }>;
  consumers: Record<string, ConsumerNames>;
  parking: { stream: string; subjectRoot: string };
}

/**
 * The names of a topology: a work stream per stream (its destination in upper case, subjects under
 * the destination), a durable consumer per subscription (named after it, reading every subject of
 * its stream), one parking stream with a subject per consumer.
 */
export function natsNames(prefix: string, topology: Topology): NatsNames {
  const streams: NatsNames['streams'] = {};
  for (const [table, destination] of Object.entries(topology.streams)) {
    streams[table] = {
      stream: `${prefix}${destination.toUpperCase()}`,
      subjectRoot: `${prefix}${destination}`,
    };
  }
  const parking = {
    stream: `${prefix}${NATS_NAMES.parkingStream}`,
    subjectRoot: `${prefix}${NATS_NAMES.parkingSubject}`,
  };
  const consumers: NatsNames['consumers'] = {};
  for (const [name, sub] of Object.entries(topology.subscriptions)) {
    const stream = streams[sub.stream] as NatsNames['streams'][Stream];
    consumers[name] = {
      stream: stream.stream,
      name: `${prefix}${name}`,
      filter: `${stream.subjectRoot}.>`,
      parkingSubject: `${parking.subjectRoot}.${name}`,
      failures: sub.failures,
    };
  }
  return { streams, consumers, parking };
}

/** A stream's configuration as `prepare` declares it. */
export type StreamSettings = Partial<StreamConfig> & { name: string };

/** A durable consumer's configuration as `prepare` declares it. */
export type ConsumerSettings = Partial<ConsumerConfig> & { durable_name: string };

/** The settings `prepare` declares the streams and consumers with. */
export interface TopologySettings {
  ackWaitMs: number;
  maxDeliver: number;
  redeliveryMaxDeliver: number;
  maxAckPending: number;
  duplicateWindowMs: number;
  maxMessages: number;
  replicas: number;
  /** How long parked copies are kept (the retention's `parkingMs`). */
  parkingMs: number;
}

/**
 * A work stream (one per outbox table). Work-queue retention: a message is removed once its
 * consumer acknowledged or terminated it, so the stream holds only unfinished work, as a queue
 * does, and a message published before its consumer exists waits for it (interest retention
 * would drop it). No age limit: a message waits for its consumer however long; the count bound
 * refuses new publishes rather than dropping old messages.
 */
export function workStreamConfig(
  names: NatsNames['streams'][Stream],
  s: TopologySettings,
): StreamSettings {
  return {
    ...storage(s),
    name: names.stream,
    subjects: [`${names.subjectRoot}.>`],
    retention: RetentionPolicy.Workqueue,
    discard: DiscardPolicy.New,
    max_msgs: s.maxMessages,
  };
}

/**
 * The parking stream: parked copies kept for the parking retention, read without being removed
 * (direct gets, hence `allow_direct`), deleted one by one when redriven.
 */
export function parkingStreamConfig(
  names: NatsNames['parking'],
  s: TopologySettings,
): StreamSettings {
  return {
    ...storage(s),
    name: names.stream,
    subjects: [`${names.subjectRoot}.>`],
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    max_age: nanos(s.parkingMs),
    allow_direct: true,
  };
}

const storage = (s: TopologySettings) => ({
  storage: StorageType.File,
  num_replicas: s.replicas,
  duplicate_window: nanos(s.duplicateWindowMs),
});

/**
 * A durable pull consumer with explicit acks: one per consumed stream, so that every worker
 * shares its deliveries and one worker receives them in stream order.
 */
export function consumerConfig(
  c: ConsumerNames,
  maxDeliver: number,
  s: TopologySettings,
): ConsumerSettings {
  return {
    durable_name: c.name,
    filter_subject: c.filter,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(s.ackWaitMs),
    max_deliver: maxDeliver,
    max_ack_pending: s.maxAckPending,
  };
}

const isApiError = (err: unknown, code: number) =>
  err instanceof JetStreamApiError && err.code === code;

/** Creates the stream, or updates it to `config`. Idempotent. */
export async function ensureStream(jsm: JetStreamManager, config: StreamSettings): Promise<void> {
  try {
    await jsm.streams.update(config.name, config);
  } catch (err) {
    if (!isApiError(err, JetStreamApiCodes.StreamNotFound)) throw err;
    await jsm.streams.add(config);
  }
}

/** Creates the durable consumer, or updates it to `config`. Idempotent. */
export async function ensureConsumer(
  jsm: JetStreamManager,
  stream: string,
  config: ConsumerSettings,
): Promise<void> {
  try {
    await jsm.consumers.update(stream, config.durable_name, config);
  } catch (err) {
    if (!isApiError(err, JetStreamApiCodes.ConsumerNotFound)) throw err;
    await jsm.consumers.add(stream, config);
  }
}

/** Whether an error says a stream or consumer is missing (deleted, or never prepared). */
export const isMissing = (err: unknown) =>
  isApiError(err, JetStreamApiCodes.StreamNotFound) ||
  isApiError(err, JetStreamApiCodes.ConsumerNotFound) ||
  /stream not found|consumer not found|consumer deleted/i.test(String((err as Error)?.message));
