import type { RetryBudget } from '../../config/budget.js';
import { CONSUMER_PREFETCH } from '../../config/constants.js';

/**
 * The NATS JetStream backend's names, headers and defaults in one place. Each outbox table is a
 * stream whose subjects start with its root (a message's subject is `<root>.<event type>`, as a
 * RabbitMQ routing key); each consumed stream has one durable pull consumer; parked copies go to
 * one parking stream, a subject per consumer. A prefix (tests, labs sharing one server) starts
 * every stream, consumer and subject name.
 */
export const NATS_NAMES = {
  parkingStream: 'PARKED',
  parkingSubject: 'parked',
} as const;

/**
 * Headers this project sets on messages, the envelope's identity as AMQP properties and SQS
 * attributes carry it. `Nats-Msg-Id` is JetStream's deduplication id: the envelope id on a first
 * publish, a distinct one on a redrive or a park copy, so the envelope id has its own header.
 */
export const NATS_HEADERS = {
  eventId: 'Event-Id',
  eventType: 'Event-Type',
  schemaVersion: 'Schema-Version',
  correlationId: 'Correlation-Id',
  producer: 'Producer',
  /** Redriven from the parking lot: how often, and when last (ISO). */
  redriveCount: 'Redrive-Count',
  redrivenAt: 'Redriven-At',
  /** On park copies: the diagnosis as one JSON value, and the subject to redrive to. */
  diagnosis: 'Diagnosis',
  originSubject: 'Origin-Subject',
} as const;

/** The identity headers a retry, park or redrive keeps from the original. */
export const IDENTITY_HEADERS = [
  NATS_HEADERS.eventId,
  NATS_HEADERS.eventType,
  NATS_HEADERS.schemaVersion,
  NATS_HEADERS.correlationId,
  NATS_HEADERS.producer,
] as const;

/** Defaults of the NATS backend, each with its reason. */
export const NATS_DEFAULTS = {
  servers: 'nats://127.0.0.1:4222',
  /**
   * AckWait, JetStream's visibility timeout: a delivery not settled by then is delivered again.
   * It must outlast a batch in the handler and the one buffered behind it (a transaction each);
   * 30 s, as the SQS visibility timeout here, leaves a crashed worker's messages waiting no longer.
   */
  ackWaitMs: 30_000,
  /**
   * Deliveries above what the retry budget can use, like SQS's `receivesAboveBudget`: room for
   * give-backs (a crash, a lost connection) so that the consumer's own parking comes first.
   */
  deliveriesAboveBudget: 3,
  /**
   * MaxDeliver of the results consumer: none (-1). It has no retry ladder, its only failure is
   * its database (a give-back per try), and past a limit JetStream would only stop delivering
   * the result, parking it nowhere: the order would wait for ever. So it waits for the database.
   */
  redeliveryMaxDeliver: -1,
  /**
   * MaxAckPending: deliveries unsettled at once over every worker. A message waiting out a nak
   * delay counts too, so it is sized for a burst of retries (the consumer stops delivering new
   * messages at the bound), far above a worker's prefetch.
   */
  maxAckPending: 10_000,
  /**
   * The duplicate window (`Nats-Msg-Id`): the relay publishes a message whose ack it did not see
   * again on its next tries (1 s, 2 s, 4 s, … backoff), so 2 minutes (JetStream's own default)
   * drops those copies while the server's id table stays small; the inbox absorbs the rest.
   */
  duplicateWindowMs: 2 * 60_000,
  /**
   * Messages a work stream holds at most: past it a publish is refused (DiscardPolicy.New, the
   * relay keeps the row and tries again), never the oldest message dropped.
   */
  maxMessages: 1_000_000,
  /** Stream replicas: 1 on a single server; 3 in a cluster. */
  replicas: 1,
  /** Unsettled deliveries a worker holds, and so its largest batch: {@link CONSUMER_PREFETCH}. */
  prefetch: CONSUMER_PREFETCH,
  publishWindow: 1_000,
  publishTimeoutMs: 10_000,
  /** A confirmed ack (`ackAck`) not answered by then fails: the delivery is given back. */
  ackTimeoutMs: 5_000,
  connectTimeoutMs: 5_000,
  /** Worker backoff after a give-back: base·2^(n−1), jittered, capped. */
  reconnectBaseMs: 200,
  reconnectMaxMs: 5_000,
} as const;

/**
 * The deliveries the retry budget can use: the first, then every retry, a deferral retried until
 * the budget's age (the shortest jittered steps, so the most of them). MaxDeliver is set above
 * this so that JetStream never stops delivering a message the consumer would still retry.
 */
export function budgetDeliveries(budget: RetryBudget): number {
  let retries = 0;
  let age = 0;
  for (;;) {
    const step = budget.ladderMs[Math.min(retries + 1, budget.ladderMs.length) - 1] ?? 0;
    const shortest = step * (1 - budget.jitter);
    if (shortest <= 0 || age + shortest > budget.maxAgeMs) break;
    age += shortest;
    retries++;
  }
  return Math.max(budget.maxAttempts, retries) + 1;
}

/** The inventory consumer's default MaxDeliver: the budget's deliveries and the margin. */
export const defaultMaxDeliver = (budget: RetryBudget) =>
  budgetDeliveries(budget) + NATS_DEFAULTS.deliveriesAboveBudget;
