import type { Envelope } from '../envelope/envelope.js';

/**
 * The transport port. Two sides, each written once for every backend (RabbitMQ, SQS, the in-memory
 * reference): publishing (`Publisher`) and consuming (a `MessageHandler` decides, a backend's
 * `Settle` carries the decision out natively, `ConsumerDriver` in `shared/consumer/` joins them).
 * Everything here is about messages and envelopes; nothing knows what the messages mean (orders,
 * stock): a use case is plugged in as a `MessageHandler`. The semantics are in docs/design.md
 * ("The transport port"); the contract suite (test/contract/transport.contract.ts) checks them
 * on every backend.
 */

// ─── Publishing ──────────────────────────────────────────────────────────────────────────────

/**
 * Semantics every backend MUST keep:
 * - `publish` resolves with exactly one outcome per envelope, in the same order, and never rejects
 *   for a per-message problem;
 * - `ok: true` only once the broker has taken responsibility for the message (RabbitMQ: publisher
 *   confirm and no `basic.return`; SQS: a successful entry in the batch response);
 * - a message whose fate is unknown (channel died, confirm timed out) is a failure: the caller
 *   publishes it again later, producing at worst a duplicate with the same id;
 * - the message id on the wire is the envelope id, so consumers can deduplicate.
 */
export type PublishFailureReason =
  | 'unroutable'
  /** Confirmed, but a declared route to a consumer queue is missing (RabbitMQ: a tap got it). */
  | 'route-missing'
  | 'nacked'
  | 'throttled'
  | 'timeout'
  | 'connection';

export type PublishOutcome =
  | {
      id: string;
      ok: true;
      /**
       * The broker already held a message with this id and dropped this one (its deduplication
       * window: JetStream's `Nats-Msg-Id`): confirmed, delivered once.
       */
      duplicate?: boolean;
    }
  | { id: string; ok: false; reason: PublishFailureReason; error: string };

/**
 * Messages the broker confirmed that may not have reached a consumer: RabbitMQ found a declared
 * route to a consumer queue missing, and a tap (bound to every key) may have taken what was
 * published before the look that saw it. The caller publishes again the messages of these event
 * types it marked published within the window (the consumers' inbox absorbs the copies).
 */
export interface RouteLoss {
  /** Whether messages of this event type needed the missing route. */
  eventTypes: (eventType: string) => boolean;
  /** The window on the marking time (`published_at`), both ends included. */
  from: Date;
  to: Date;
  /** What is or was missing (`no binding orders → inventory.orders (order.created) on the broker`). */
  reason: string;
}

export interface Publisher {
  publish(envelopes: readonly Envelope[]): Promise<PublishOutcome[]>;
  /**
   * The route losses seen since the last call, taken (a later call does not return them again).
   * Absent: the backend has no routes to lose (SQS, in-memory).
   */
  takeRouteLosses?(): RouteLoss[];
  /** Gives back losses taken and not acted on (the database failed): the next take returns them. */
  returnRouteLosses?(losses: readonly RouteLoss[]): void;
  /**
   * Resolves when the publisher can reach its broker, or rejects with `TransportUnavailableError`
   * within `timeoutMs`. Callers check this before taking work they would only fail.
   */
  ready(timeoutMs?: number): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
}

// ─── Topology ────────────────────────────────────────────────────────────────────────────────

/**
 * Where a service's events go and who reads them, by name: configuration every backend is built
 * with (`BackendBase.topology`), never pinned in a backend. Transport-neutral; each backend derives
 * its own names from it (docs/design.md, "Topology"): RabbitMQ declares a topic exchange per
 * stream and binds each subscription's queue by its types; SQS reads a queue per subscription
 * (the queue name with `.` as `-`); JetStream makes a stream per stream (the destination in upper
 * case, its subjects under the destination) and a durable consumer per subscription (its name).
 */
export interface Topology {
  /** Each stream (an outbox table) and the name of its destination on the broker. */
  streams: Readonly<Record<Stream, string>>;
  /**
   * Each subscription by name (what `consume` and a Lambda driver take as `queue`); the first one
   * is the default.
   */
  subscriptions: Readonly<Record<string, Subscription>>;
  /**
   * Queues bound to a stream that nothing here consumes, standing for another team's consumer
   * (RabbitMQ declares them, bounded; the other backends ignore them).
   */
  taps?: readonly Tap[] | undefined;
}

/** A consumer's queue on one stream. */
export interface Subscription {
  /** Its queue's name on the broker (RabbitMQ; SQS with `.` as `-`). */
  queue: string;
  stream: Stream;
  /**
   * The event types it takes, as topic patterns (`*`: one word, `#`: any): RabbitMQ binds them;
   * SQS and JetStream deliver every type of the stream and the handler refuses the others.
   */
  types: readonly string[];
  /**
   * What follows a failed delivery: `retries`, the library's retry ladder and then the consumer
   * parks with a diagnosis; `redelivery`, given back until the broker's delivery limit, then the
   * broker parks it (a consumer that only acknowledges or gives back).
   */
  failures: 'retries' | 'redelivery';
}

/** A queue bound to a stream that nothing here consumes. */
export interface Tap {
  queue: string;
  stream: Stream;
  types: readonly string[];
}

/** The subscription named `name` (default: the first); a clear error for an unknown one. */
export function subscriptionOf(
  topology: Topology,
  name?: string,
): { name: string; subscription: Subscription } {
  const names = Object.keys(topology.subscriptions);
  const chosen = name ?? names[0];
  const subscription = chosen === undefined ? undefined : topology.subscriptions[chosen];
  if (chosen === undefined || !subscription) {
    throw new Error(
      `no subscription "${name ?? ''}" in the topology (one of: ${names.join(', ') || 'none'})`,
    );
  }
  return { name: chosen, subscription };
}

/**
 * Where a publisher sends, by name: the relay passes its outbox table. Each backend's
 * configuration maps a stream to its own destination (RabbitMQ: an exchange; SQS: a queue); an
 * unknown stream is a configuration error.
 */
export type Stream = string;

// ─── Consuming ───────────────────────────────────────────────────────────────────────────────

/** A received message as a use case sees it, whatever the transport. */
export interface InboundMessage {
  /** The transport's message id (AMQP `message_id`, SQS attribute); must equal the envelope id. */
  messageId: string | undefined;
  body: Buffer;
  /** Retries already made (0 on the first delivery), as carried by the transport. */
  attempt: number;
  /** The transport says it delivered this message before (AMQP `redelivered`, SQS receive count). */
  redelivered: boolean;
  /** When this message first failed (ISO), carried across retries. */
  firstFailureAt?: string | undefined;
  /** Event type as the transport saw it (AMQP `type`), for diagnoses of unreadable bodies. */
  type?: string | undefined;
  /** Envelope schema version as the transport saw it (header or attribute). */
  schemaVersion?: string | undefined;
  correlationId?: string | undefined;
  /** Who produced it, as the transport saw it (AMQP `app_id`); else the body's `producer`. */
  producer?: string | undefined;
  /** Where the message came from (the queue it was consumed from; RabbitMQ: the original route). */
  origin?: Origin | undefined;
  /**
   * Set when an operator redrove the message from the parking lot: how many times, and when last
   * (ISO). The retry window starts again at `lastAt` (the message keeps its event id).
   */
  redrive?: Redrive | undefined;
}

/**
 * Where a message came from: the queue it was consumed from and, on RabbitMQ, the exchange and
 * routing key the producer's relay published it with (kept across retries and parking).
 */
export interface Origin {
  queue: string | null;
  exchange: string | null;
  routingKey: string | null;
}

/** How often a message was redriven from the parking lot, and when last (ISO). */
export interface Redrive {
  count: number;
  lastAt: string;
}

/**
 * How a failure is classified:
 * - `transient`: may succeed later (connection loss, serialization failure, deadlock, timeout);
 * - `permanent`: will never succeed (invalid JSON, missing id, schema violation, unknown version);
 * - `unknown`: anything else; retried within the budget, then parked.
 * Business outcomes (out of stock) are results, not failures.
 */
export type ErrorClass = 'transient' | 'permanent' | 'unknown';

/** Why a message is parked. */
export type ParkReason = 'permanent' | 'exhausted' | 'max_age' | 'missing_predecessor';

/** A use case's decision for one message. */
export type Outcome =
  /** Done. `result` is the use case's own label for the journal (`reserved`, `duplicate`, …). */
  | { kind: 'ack'; result: string }
  | {
      kind: 'retry';
      /** Delay before the next attempt (a ladder step). */
      delayMs: number;
      /** The attempt number the next delivery will carry. */
      attempt: number;
      errorClass: ErrorClass | 'deferred';
      error: string;
      /** The use case's own infrastructure (its database), not the message, failed. */
      infrastructure: boolean;
    }
  | { kind: 'park'; reason: ParkReason; errorClass: ErrorClass | 'deferred'; error: string };

export type RetryOutcome = Extract<Outcome, { kind: 'retry' }>;
export type ParkOutcome = Extract<Outcome, { kind: 'park' }>;

/**
 * The use-case contract: one outcome per message, in order. It throws only when it could not
 * decide at all (an injected fault, a bug); the driver then gives the whole batch back.
 */
export type MessageHandler = (messages: readonly InboundMessage[]) => Promise<Outcome[]>;

/** What an operator reads about a parked message. Never the payload, never secrets. */
export interface Diagnosis {
  messageId: string | null;
  type: string | null;
  schemaVersion: string | null;
  attempts: number;
  firstFailureAt: string;
  parkedAt: string;
  reason: ParkReason;
  errorClass: string;
  error: string;
  correlationId: string | null;
  /**
   * The trace id of the invocation that produced the event (envelope `trace_id`: the X-Ray trace
   * id of the producing Lambda invocation, or one made in that format where none runs).
   */
  traceId: string | null;
  /** The envelope's `producer` (RabbitMQ: also the AMQP `app_id`). */
  producer: string | null;
  /** The queue it was consumed from and, on RabbitMQ, its original exchange and routing key. */
  origin: Origin;
  consumer: string;
  /** Times the message was redriven before this park (absent or 0: never), and when last. */
  redriveCount?: number | undefined;
  lastRedriveAt?: string | undefined;
}

/**
 * What a use case announces when one of its messages is parked, so that the side waiting for its
 * answer does not wait for ever (inventory: `inventory.reservation_quarantined` for the order).
 * The consumer driver builds the notice from the parked body and its diagnosis and publishes it
 * through the backend's publisher of `stream` (confirmed), before acknowledging the original; the
 * CLI (`parked notify`) builds the same notices, with the same ids, from the parking lot.
 */
export interface ParkNotices {
  /** The publisher stream the notices go to (`inventory_outbox`: the results destination). */
  stream: Stream;
  /** The notice for a parked message, or undefined when there is nobody to tell. */
  build(body: Buffer, diagnosis: Diagnosis, via: ParkedEntry['via']): Envelope | undefined;
}

/** One received message and the backend's native handle on it (delivery tag, record, …). */
export interface Delivery {
  readonly message: InboundMessage;
}

/** What `retryLater` is asked to do. */
export interface RetryRequest {
  delayMs: number;
  /** The attempt number the next delivery carries. */
  attempt: number;
  errorClass: ErrorClass | 'deferred';
  error: string;
  /** When the message first failed (kept across retries). */
  firstFailureAt: string;
  /** Where the message came from (kept across retries where the copy can carry it). */
  origin?: Origin | undefined;
}

/**
 * How `retryLater` or `park` left the delivery:
 * - `ack`: the copy is made (confirmed); the original is to be acknowledged now (the driver
 *   calls `ack` right after, with the fault point `reserve.after-retry-publish` in between);
 * - `returned`: the same message comes back later by itself (SQS: a visibility change, or a
 *   record reported failed because parking refused it);
 * - `dead-lettered`: the broker itself moves it to parking (RabbitMQ `nack(requeue=false)` with
 *   at-least-once dead lettering, when the park copy was refused).
 */
export interface Settled {
  state: 'ack' | 'returned' | 'dead-lettered';
  /** One line for the journal (`in 1000 ms`, `visibility`, why parking refused it). */
  detail?: string | undefined;
}

/**
 * The settle contract: what each backend implements natively for the deliveries it received.
 * Semantics (the driver relies on them, the contract suite checks them):
 * - `ack`: the message is done; the transport will not deliver it again (for `ackMode: 'batch'`,
 *   once the whole batch is settled);
 * - `retryLater` and `park` keep the message id; a copy counts only once the broker confirmed it;
 * - an operation that cannot be done rejects (a `TransportError`): the driver then gives the
 *   delivery back, so nothing is acknowledged that was not settled;
 * - `giveBack` hands deliveries back unsettled, and the broker delivers them again. Its native
 *   form may be to throw (a Lambda trigger fails the invocation): the driver lets that propagate.
 */
export interface Settle<D extends Delivery> {
  /**
   * `message`: each ack takes effect on its own (worker, SQS record not reported); `batch`: acks
   * take effect only when the whole batch is settled (the Amazon MQ trigger: returning acks all).
   */
  readonly ackMode: 'message' | 'batch';
  ack(delivery: D): Promise<void>;
  retryLater(delivery: D, retry: RetryRequest): Promise<Settled>;
  park(delivery: D, diagnosis: Diagnosis): Promise<Settled>;
  giveBack(deliveries: readonly D[], cause: Error): Promise<void>;
}

// ─── Parking lot, inspection, capabilities ─────────────────────────────────────────────────

export interface ParkedEntry {
  diagnosis: Diagnosis;
  /** Parked by the consumer (with its diagnosis) or dead-lettered by the broker itself. */
  via: 'consumer' | 'broker';
  /** The parked message's body (never printed by `parked list`: the notices read it). */
  body?: Buffer | undefined;
}

export interface RedriveSelection {
  types?: string[];
  /** Matches the diagnosis' error class or park reason (`transient`, `permanent`, `exhausted`, …). */
  errorClasses?: string[];
  /** Parked at or after / before. */
  since?: Date;
  until?: Date;
  ids?: string[];
}

export interface RedriveOptions {
  /** Messages per second at most. */
  rate?: number;
  dryRun?: boolean;
  onMoved?: (id: string) => void;
  /** How long to wait for a broker-side move (an SQS move task) to finish (default 15 min). */
  timeoutMs?: number;
  /**
   * Redrives per message allowed (default: the backend's `retention.redriveLimit`,
   * `REDRIVE_LIMIT`). A matched message already redriven this often stays parked and is reported
   * in `skipped`: the inbox retention is sized for this many redrives.
   */
  redriveLimit?: number;
  /**
   * The operator's override: redrive matched messages past the limit. Their inbox rows may be
   * gone, so their effect may apply a second time.
   */
  beyondLimit?: boolean;
}

/** A matched message left in the parking lot, and why. */
export interface RedriveSkip {
  messageId: string;
  /** Times it was already redriven. */
  redriveCount: number;
  reason: string;
}

/**
 * A broker-side move of the whole parking lot (SQS `StartMessageMoveTask`), as it ended: `RUNNING`
 * when the wait timed out (the task goes on), else the task's final status.
 */
export interface MoveTaskReport {
  handle: string;
  status: 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'RUNNING';
  /** Messages moved so far (SQS: approximate). */
  moved: number;
  /** Messages the task set out to move, when the broker tells. */
  toMove?: number | undefined;
  failureReason?: string | undefined;
}

export interface RedriveResult {
  scanned: number;
  matched: number;
  /** The ids moved one by one (a move task moves without telling them: see `task`). */
  moved: string[];
  dryRun: boolean;
  /** Matched but left parked (the redrive limit reached); in a dry run, the ones that would be. */
  skipped: RedriveSkip[];
  /** Set when a broker-side move task did the move: done only when `status` is `COMPLETED`. */
  task?: MoveTaskReport | undefined;
}

/**
 * The parking lot as operators see it, whatever the transport: read diagnoses (reading takes
 * nothing out), move selected messages back with the same id and their attempts reset. Never
 * automatic.
 */
export interface ParkingLot {
  list(limit?: number): Promise<ParkedEntry[]>;
  redrive(selection: RedriveSelection, options?: RedriveOptions): Promise<RedriveResult>;
}

/** Where the consumer's messages are, as far as the backend can tell. */
export interface Inspection {
  /** Waiting to be delivered. */
  ready: number;
  /** Delivered and not yet settled (unacknowledged, invisible). */
  inFlight: number;
  /** Waiting out a retry delay (RabbitMQ retry queues, SQS delayed messages). */
  retrying: number;
  parked: number;
  /** Held by the broker for dead lettering because parking refused them (RabbitMQ). */
  heldForDeadLettering: number;
  /** Age of the oldest message waiting, where the backend exposes it (in-memory only). */
  oldestAgeMs?: number | undefined;
}

/** Where a backend's consumer runs: in this process (`worker`) or behind a Lambda event source. */
export type ConsumeMode = 'worker' | 'lambda';

/**
 * What a backend can do, declared like Watermill's features: the contract suite, the lab's
 * scenarios and its report read them, never the backend's name.
 */
export interface Capabilities {
  /** Messages with the same key (aggregate id) are delivered in publish order. */
  orderedPerKey: boolean;
  /** A retry delay is per message (SQS, in-memory, JetStream), not one of a set of delay queues (RabbitMQ). */
  perMessageDelay: boolean;
  /** A batch's records can be settled one by one (SQS partial batch response, worker acks). */
  partialBatchResponse: boolean;
  /**
   * The broker marks a delivery after the first (RabbitMQ `redelivered`, SQS
   * `ApproximateReceiveCount`, JetStream's delivery count); else `redelivered` is always false.
   */
  redeliveryFlag: boolean;
  /**
   * The broker may deliver one message twice with no failure in between (SQS standard queues:
   * at-least-once by design); elsewhere a copy follows a failure (a give-back, a lost ack).
   */
  spontaneousDuplicates: boolean;
  /**
   * The broker parks by itself a message delivered too often (RabbitMQ `delivery-limit`, SQS
   * `maxReceiveCount`): a backstop behind the consumer's own parking.
   */
  brokerParking: boolean;
  /**
   * The broker drops a second publish of one message id within a window (JetStream
   * `Nats-Msg-Id`, SQS FIFO deduplication): the inbox still guards what the window misses.
   */
  publishDeduplication: boolean;
  /** Where the consumer runs: `worker` through `consume`, `lambda` behind an event source. */
  consumeModes: readonly ConsumeMode[];
}

/**
 * The consumer's journal as the driver writes it (`Journal` in shared/consumer implements it):
 * one line per step of a delivery.
 */
export interface DeliveryJournal {
  recordMessage(
    step: JournalStep,
    message: InboundMessage | undefined,
    outcome?: string,
    reason?: string,
  ): void;
}

/** The steps a delivery's journal records (docs/consumer.md, "Journal"). */
export type JournalStep =
  | 'received'
  | 'duplicate'
  | 'effect-committed'
  | 'deferred'
  | 'retry-scheduled'
  | 'parked'
  | 'acked'
  | 'abandoned';

/** How `consume` runs a consumer in this process. */
export interface ConsumeOptions {
  /** Which subscription of the topology (default: its first). */
  queue?: string | undefined;
  journal?: DeliveryJournal | undefined;
  /** The use case's notices of parked messages (published through this backend). */
  notices?: ParkNotices | undefined;
  /** Consumers in this process (each with its own transaction). Default 1. */
  concurrency?: number | undefined;
  /** Unacknowledged deliveries per consumer, and the largest batch. */
  prefetch?: number | undefined;
  maxBatch?: number | undefined;
  /** Reconnect backoff after a give-back (ms). */
  reconnectBaseMs?: number | undefined;
  reconnectMaxMs?: number | undefined;
}

/**
 * One backend, composed from configuration by its module (`TransportModule`): everything a
 * runtime needs, both sides.
 */
export interface Backend {
  /** The name of the module that built it (`rabbitmq`, `sqs`, …): for logs and reports. */
  readonly transport: string;
  readonly capabilities: Capabilities;
  /**
   * Declares what the pipeline needs (exchanges, queues, bindings, policies), idempotently.
   * `publish`: only what publishing needs (the relay); `consume` (default): everything.
   */
  prepare(scope?: 'publish' | 'consume'): Promise<PrepareReport>;
  /** Resolves when the broker answers, or rejects with `TransportUnavailableError`. */
  ready(timeoutMs?: number): Promise<void>;
  publisher(stream?: Stream): Publisher;
  /**
   * Runs a consumer in this process (the `worker` mode) around `handler`, through the consumer
   * driver and this backend's settle. A backend without `worker` among its `consumeModes`
   * rejects: its consumer runs behind a Lambda event source only.
   */
  consume(handler: MessageHandler, options?: ConsumeOptions): Promise<RunningConsumer>;
  parkingLot(): ParkingLot;
  inspect(): Promise<Inspection>;
  /**
   * Publishes the queue metrics the broker's own CloudWatch metrics lack (Amazon MQ for RabbitMQ
   * 4 vends no per-queue metrics), where the backend was configured to; never throws. Absent:
   * the service's own metrics suffice (SQS).
   */
  reportMetrics?(): Promise<void>;
  /** Releases every connection and client this backend opened. Idempotent. */
  close(): Promise<void>;
}

/** What `prepare` declared. */
export interface PrepareReport {
  queues: number;
  policies: number;
  /** The broker's name and version, where it tells. */
  server?: string | undefined;
}

/** A consumer that runs in this process (worker, in-memory, a trigger emulation). */
export interface RunningConsumer {
  /** Stops taking deliveries; what is in flight is settled first. */
  stop(): Promise<void>;
  /** Batches handed to the driver and the messages in them; give-backs (reconnects, failed invocations). */
  readonly stats: { batches: number; messages: number; givenBack: number };
}
