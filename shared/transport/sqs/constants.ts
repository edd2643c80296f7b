import { ConfigError } from '../../config/errors.js';
import type { Stream, Topology } from '../../port/types.js';

/** The SQS backend's queue names from the topology, its attributes and limits in one place. */
export interface SqsQueueNames {
  /** The queue of the subscription that retries and parks (`failures: 'retries'`). */
  source: string;
  parking: string;
  fifo: boolean;
  /** The queue of the subscription that only gives back (`failures: 'redelivery'`), if any. */
  results: string | undefined;
  /** The subscriptions' names, and the streams whose events go to each queue. */
  sourceSubscription: string;
  resultsSubscription: string | undefined;
  sourceStream: Stream;
  resultsStream: Stream | undefined;
}

/** A subscription's queue name on SQS: its queue's name with `.` as `-` (SQS allows no dots). */
export const sqsQueueName = (queue: string) => queue.replace(/\./g, '-');

/**
 * The SQS queues of a topology: SQS is point-to-point, so the backend reads one subscription of
 * each kind: the one that retries and parks (its queue, and `<queue>-parking`; FIFO: both with
 * `.fifo`), and at most one that only gives back (its queue; its parking queue, if any, is its
 * redrive policy's, made by the stack). Any other topology is a `ConfigError`.
 */
export function sqsQueueNames(topology: Topology, prefix = '', fifo = false): SqsQueueNames {
  const subs = Object.entries(topology.subscriptions);
  const retrying = subs.filter(([, s]) => s.failures === 'retries');
  const redelivering = subs.filter(([, s]) => s.failures === 'redelivery');
  const [source] = retrying;
  if (!source || retrying.length > 1 || redelivering.length > 1) {
    throw new ConfigError(
      "the SQS backend reads one subscription that retries and at most one that only gives back (failures: 'redelivery')",
    );
  }
  const [results] = redelivering;
  const suffix = fifo ? '.fifo' : '';
  const base = `${prefix}${sqsQueueName(source[1].queue)}`;
  return {
    source: `${base}${suffix}`,
    parking: `${base}-parking${suffix}`,
    fifo,
    results: results ? `${prefix}${sqsQueueName(results[1].queue)}` : undefined,
    sourceSubscription: source[0],
    resultsSubscription: results?.[0],
    sourceStream: source[1].stream,
    resultsStream: results?.[1].stream,
  };
}

/**
 * A fan-out stream's SNS topic: its destination's name with `.` as `-`, after the prefix; FIFO
 * with `.fifo` (a FIFO topic delivers to FIFO queues only).
 */
export const snsTopicName = (destination: string, prefix = '', fifo = false) =>
  `${prefix}${sqsQueueName(destination)}${fifo ? '.fifo' : ''}`;

/**
 * The SNS filter policy that takes a subscription's event types, when the types can be written as
 * one: exact names, and `prefix.#` as a prefix match; `#` alone, or a `*` anywhere, takes every
 * message of the stream (undefined: the handler refuses the types it does not take).
 */
export function snsFilterPolicy(types: readonly string[]): string | undefined {
  const conditions: (string | { prefix: string })[] = [];
  for (const type of types) {
    if (type.includes('*') || type === '#') return undefined;
    if (type.endsWith('.#') && !type.slice(0, -2).includes('#')) {
      conditions.push({ prefix: type.slice(0, -1) });
    } else if (type.includes('#')) {
      return undefined;
    } else {
      conditions.push(type);
    }
  }
  return conditions.length ? JSON.stringify({ [SQS_ATTRIBUTES.eventType]: conditions }) : undefined;
}

/** Message attributes this project sets on SQS messages (names allow `_`, not `-` first). */
export const SQS_ATTRIBUTES = {
  eventId: 'event_id',
  eventType: 'event_type',
  schemaVersion: 'schema_version',
  correlationId: 'correlation_id',
  attempt: 'retry_attempt',
  firstFailureAt: 'first_failure_at',
  /** "<count> <ISO time>": redriven from the parking lot, how often and when last. */
  redrive: 'redrive',
} as const;

/**
 * Diagnosis attributes on parked SQS messages (SQS allows at most 10 attributes per message).
 * A park writes the whole diagnosis as one JSON attribute, `diagnosis` (`SqsPackedDiagnosis`),
 * beside the identity attributes and the redrive stamp (6 at most). Messages parked before carry
 * the older layout, one attribute per field (`park_reason`, `error_class`, `error`, `consumer`,
 * `retry_attempt`, `first_failure_at`; parked at its SentTimestamp): still read.
 */
export const SQS_DIAGNOSIS = {
  /** The packed diagnosis (JSON). */
  packed: 'diagnosis',
  parkReason: 'park_reason',
  /** Not on a redriven message: its class leads `error` ("transient: …"), for the stamp's room. */
  errorClass: 'error_class',
  error: 'error',
  /** The consumer and its version. */
  consumer: 'consumer',
} as const;

/** How "retry later" is done on SQS: a visibility change, or a delayed copy. */
export type SqsRetryMode = 'visibility' | 'resend';

/** SQS's hard limits the backend works within (docs/design.md, "AWS limits"). */
export const SQS_LIMITS = {
  /** A message's total invisibility is capped at 12 hours from its first receive. */
  visibilityCapSeconds: 12 * 3600,
  /** A message delay is at most 15 minutes. */
  maxDelaySeconds: 900,
  /** Entries per batch call. */
  batchEntries: 10,
  /** Longest long poll. */
  maxWaitSeconds: 20,
} as const;

/** The safety net fires only after the application's budget is spent (+2 for crashes). */
export const SQS_DEFAULTS = {
  visibilityTimeoutSeconds: 30,
  retentionSeconds: 4 * 24 * 3600,
  receivesAboveBudget: 3,
} as const;
