import { CONSUMER_PREFETCH } from '../../config/constants.js';

/** The RabbitMQ backend's headers and defaults in one place (names: `Topology`, `topology.ts`). */

/** The envelope's schema version travels in this header (and in the body). */
export const SCHEMA_VERSION_HEADER = 'x-schema-version';

/** Headers this project sets on messages (x-death is the broker's). */
export const HEADERS = {
  attempt: 'x-retry-attempt',
  lastError: 'x-last-error',
  errorClass: 'x-error-class',
  firstFailureAt: 'x-first-failure-at',
  parkedAt: 'x-parked-at',
  parkReason: 'x-park-reason',
  consumer: 'x-consumer',
  schemaVersion: SCHEMA_VERSION_HEADER,
  redrivenAt: 'x-redriven-at',
  redriveCount: 'x-redrive-count',
  /** Set by the publisher: the exchange and routing key the event was first published with. */
  originExchange: 'x-origin-exchange',
  originRoutingKey: 'x-origin-routing-key',
  /** On retry and park copies: the queue the message was consumed from. */
  originQueue: 'x-origin-queue',
  /** On park copies: the envelope's trace id and producer. */
  traceId: 'x-trace-id',
  producer: 'x-producer',
} as const;

/** Longest error text carried in a header. */
export const MAX_ERROR_HEADER = 256;

/** Queue metrics the RabbitMQ pipeline's alarms watch (namespace ReliableMessaging, dimension Queue). */
export const QUEUE_METRICS = {
  /** Ready + unacknowledged messages. */
  depth: 'QueueDepth',
  ready: 'QueueReady',
  /** Declared bindings of a consumer queue that the broker does not have (0 when every route exists). */
  routeMissing: 'RouteMissing',
  /**
   * 1 when an invocation read every depth and route from the broker, 0 when it could not (no
   * `Queue` dimension): the depth alarms' missing data then means "unavailable", not "breaching".
   */
  available: 'QueueMetricsAvailable',
  /**
   * Messages of `inventory.orders` the broker holds for dead lettering: parking refused them
   * (its DLX route, or the parking queue at its bound), so they are neither deliverable nor parked.
   */
  heldForDeadLettering: 'HeldForDeadLettering',
} as const;

/**
 * The Amazon MQ event source's batching (AWS defaults: 100 messages, 500 ms): the deployed event
 * source mapping and the local trigger emulation both read it.
 */
export const AMAZON_MQ_TRIGGER = { batchSize: 100, batchWindowMs: 500 } as const;

/** Defaults of the RabbitMQ backend, each used in one place only. */
export const RABBITMQ_DEFAULTS = {
  /** Unacknowledged deliveries per worker channel: {@link CONSUMER_PREFETCH}. */
  prefetch: CONSUMER_PREFETCH,
  /** Quorum-queue deliveries of one message before the broker dead-letters it itself. */
  deliveryLimit: 10,
  /**
   * The same for `orders.inventory-results`, whose consumer has no retry ladder: every give-back
   * while its database is down is a delivery (the worker backs off 0.2 → 5 s, the Amazon MQ
   * trigger redelivers after its own backoff), so the limit is high enough to ride out a short
   * outage and still ends a loop; over it the result goes to its parking queue, never dropped.
   * (On 4.3 a plain requeue no longer counts: behind the Amazon MQ trigger the results then wait
   * for the database, retried at the trigger's backoff; docs/design.md §4.)
   */
  resultsDeliveryLimit: 50,
  /** Policy priority: above Amazon MQ's AWS-DEFAULT-POLICY-* so ours is the one that applies. */
  policyPriority: 10,
  /** Confirms awaited at once by a publisher. */
  publishWindow: 1_000,
  confirmTimeoutMs: 10_000,
  connectTimeoutMs: 5_000,
  /** Reconnect backoff (connection recovery and a worker's channel): base·2^(n−1), capped. */
  reconnectBaseMs: 200,
  reconnectMaxMs: 5_000,
  /**
   * How long the publisher trusts its last look at the bindings its consumer queues need
   * (management API, one request per exchange): a lost route is found within this time.
   */
  routeCheckIntervalMs: 10_000,
  /** A route check the management API does not answer in time counts as "not known". */
  routeCheckTimeoutMs: 2_000,
  /**
   * A lost route's republish window is widened by this much at both ends: the relay's clock (the
   * looks) against the database's (`published_at`), and a marking's COMMIT after its statement.
   */
  routeLossMarginMs: 5_000,
  /**
   * How far back a lost route's republish window starts when this process never saw the route
   * present (it started while the route was missing): rows another relay marked that long ago.
   */
  routeLossLookbackMs: 10 * 60_000,
} as const;

/**
 * The bounds of queues that could otherwise grow for ever (policy keys `max-length`, `overflow`,
 * `message-ttl`; docs/design.md, "RabbitMQ topology"). `max-length` counts ready messages only.
 * The alarms fire at `ALARM_FRACTION` of each bound.
 */
export const QUEUE_BOUNDS = {
  /**
   * `audit.orders` has no consumer here (it stands for another consumer of every order event): a
   * tap may lose its oldest events (`drop-head`) but must never refuse a publish, which would fail
   * the relay's confirm and hold every order event back for a queue nobody reads.
   */
  audit: {
    maxLength: 100_000,
    messageTtlMs: 7 * 24 * 3_600_000,
    overflow: 'drop-head',
    deliveryLimit: 20,
  },
  /**
   * `orders.inventory-results` is consumed by the order side: if that consumer stops, refusing
   * publishes (`reject-publish`: the relay gets a nack, the rows stay in `inventory_outbox`)
   * keeps every result; dropping would lose order status changes. No TTL for the same reason.
   */
  inventoryResults: { maxLength: 100_000, overflow: 'reject-publish' },
  /**
   * The parking lot keeps its TTL (the parking retention) and refuses parks beyond the bound:
   * a refused park leaves the message held in `inventory.orders` (at-least-once dead
   * lettering), never dropped.
   */
  parking: { maxLength: 100_000, overflow: 'reject-publish' },
  /**
   * The results parking lot: the same (parking retention, refused beyond the bound: a refused
   * dead letter stays held in `orders.inventory-results`).
   */
  resultsParking: { maxLength: 100_000, overflow: 'reject-publish' },
  /**
   * Each retry delay queue (`inventory.orders.retry.<ms>`) empties itself by its TTL, but only
   * while its dead-letter route (`inventory.orders.requeue` → `inventory.orders`) takes the
   * expired copies: at-least-once dead lettering holds them otherwise, and a database outage
   * fills them. Beyond the bound a retry copy is refused (`reject-publish`): the copy is not
   * confirmed, so the consumer gives the message back instead of acknowledging it; none is lost.
   */
  retry: { maxLength: 100_000, overflow: 'reject-publish' },
  alarmFraction: 0.8,
} as const;
