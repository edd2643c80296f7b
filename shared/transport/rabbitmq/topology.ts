import type { Channel } from 'amqplib';
import { type Retention, type RetryBudget, rabbitRetryDelays } from '../../config/budget.js';
import {
  INVENTORY_ROUTING_KEYS,
  QUEUE_BOUNDS,
  RABBITMQ_DEFAULTS,
  RABBITMQ_NAMES,
  RETRY_NAMES,
  retryQueueName,
} from './constants.js';
import type { RabbitManagement } from './RabbitManagement.js';

/**
 * The RabbitMQ topology (docs/design.md, "RabbitMQ topology"), declared idempotently: declaring it again with the same
 * arguments is a no-op, so every process declares it at start.
 *
 * Only structural arguments (`x-queue-type`) are set at declaration. TTLs, dead lettering and
 * limits are set by policies (`applyPolicies`, through the management API, as on Amazon MQ) so they
 * can change without redeclaring queues: queue arguments can never change once a queue exists.
 */
export interface TopologyDeclaration {
  exchanges: { name: string; type: 'topic' | 'direct' }[];
  queues: {
    name: string;
    bindings: { exchange: string; pattern: string }[];
    /**
     * A tap (a queue no consumer of this project depends on): its bindings are not routes the
     * publisher must verify, so they never mask a missing route to a consumer queue.
     */
    tap?: true;
  }[];
}

/** Exchanges and queues every role needs: the order and inventory event flows. */
export const CORE_TOPOLOGY: TopologyDeclaration = {
  exchanges: [
    { name: RABBITMQ_NAMES.ordersExchange, type: 'topic' },
    { name: RABBITMQ_NAMES.inventoryExchange, type: 'topic' },
  ],
  queues: [
    {
      // Inventory consumes exactly the order events it acts on.
      name: RABBITMQ_NAMES.inventoryQueue,
      bindings: INVENTORY_ROUTING_KEYS.map((pattern) => ({
        exchange: RABBITMQ_NAMES.ordersExchange,
        pattern,
      })),
    },
    {
      // A second consumer of every order event: retries must never copy into it.
      name: RABBITMQ_NAMES.auditQueue,
      bindings: [{ exchange: RABBITMQ_NAMES.ordersExchange, pattern: 'order.#' }],
      tap: true,
    },
    {
      // The order service hears inventory results (reservation rejected, …).
      name: RABBITMQ_NAMES.inventoryResultsQueue,
      bindings: [{ exchange: RABBITMQ_NAMES.inventoryExchange, pattern: 'inventory.#' }],
    },
  ],
};

/**
 * The core plus inventory's delayed retries and parking lot. One retry queue per delay (a
 * quorum queue expires messages only at its head: mixed delays in one queue would hold short
 * ones behind long ones). Expired retries dead-letter through a dedicated exchange bound only to
 * `inventory.orders`: dead-lettering back into `orders` would copy the retry into `audit.orders`.
 */
export function buildTopology(budget: RetryBudget): TopologyDeclaration {
  const delays = rabbitRetryDelays(budget);
  return {
    exchanges: [
      ...CORE_TOPOLOGY.exchanges,
      { name: RETRY_NAMES.retryExchange, type: 'direct' },
      { name: RETRY_NAMES.requeueExchange, type: 'direct' },
      { name: RETRY_NAMES.parkingExchange, type: 'direct' },
      { name: RABBITMQ_NAMES.resultsParkingExchange, type: 'direct' },
    ],
    queues: [
      ...CORE_TOPOLOGY.queues.map((q) =>
        q.name === RABBITMQ_NAMES.inventoryQueue
          ? {
              ...q,
              bindings: [
                ...q.bindings,
                { exchange: RETRY_NAMES.requeueExchange, pattern: RETRY_NAMES.requeueRoutingKey },
              ],
            }
          : q,
      ),
      ...delays.map((d) => ({
        name: retryQueueName(d),
        bindings: [{ exchange: RETRY_NAMES.retryExchange, pattern: String(d) }],
      })),
      {
        name: RETRY_NAMES.parkingQueue,
        bindings: [
          { exchange: RETRY_NAMES.parkingExchange, pattern: RETRY_NAMES.parkingRoutingKey },
        ],
      },
      {
        // Where results over their delivery limit go (the order side's consumer never parks).
        name: RABBITMQ_NAMES.resultsParkingQueue,
        bindings: [
          {
            exchange: RABBITMQ_NAMES.resultsParkingExchange,
            pattern: RABBITMQ_NAMES.resultsParkingRoutingKey,
          },
        ],
      },
    ],
  };
}

export async function declareTopology(
  ch: Channel,
  topology: TopologyDeclaration = CORE_TOPOLOGY,
): Promise<void> {
  for (const ex of topology.exchanges) {
    await ch.assertExchange(ex.name, ex.type, { durable: true });
  }
  for (const q of topology.queues) {
    // Quorum queues: replicated on Amazon MQ clusters, durable, with poison-message protection.
    await ch.assertQueue(q.name, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    for (const b of q.bindings) {
      await ch.bindQueue(q.name, b.exchange, b.pattern);
    }
  }
}

export interface PolicyOptions {
  /**
   * Deliveries of one message before the broker itself dead-letters it to parking: the backstop
   * for a message that kills its consumer every time (crash loops never reach our own budget).
   */
  deliveryLimit?: number;
  /** The same for `orders.inventory-results` (default `RABBITMQ_DEFAULTS.resultsDeliveryLimit`). */
  resultsDeliveryLimit?: number;
  /** Policy priority: above Amazon MQ's AWS-DEFAULT-POLICY-* so ours is the one that applies. */
  priority?: number;
}

export interface Policy {
  name: string;
  pattern: string;
  definition: Record<string, string | number>;
}

const exact = (name: string) => `^${name.replace(/\./g, '\\.')}$`;

/**
 * `delivery-limit` for a queue whose messages must never be dropped or moved by a delivery count:
 * -1 turns RabbitMQ 4's default limit (20) off. RabbitMQ 3.x has no default limit and refuses -1,
 * so `policyForBroker` leaves the key out there.
 */
export const UNLIMITED_DELIVERIES = -1;

/**
 * One policy per queue holding every key for it (only the highest-priority policy applies to a
 * queue, so keys split across policies would silently not combine).
 */
export function buildPolicies(
  budget: RetryBudget,
  retention: Retention,
  options: PolicyOptions = {},
): Policy[] {
  // at-least-once dead lettering: the source queue keeps a dead-lettered message until the target
  // queue confirms it, so a parking (or requeue) route that is missing loses nothing. It requires
  // `overflow: reject-publish` (publishers are refused rather than old messages dropped).
  const atLeastOnce = { 'dead-letter-strategy': 'at-least-once', overflow: 'reject-publish' };
  return [
    {
      name: RABBITMQ_NAMES.inventoryQueue,
      pattern: exact(RABBITMQ_NAMES.inventoryQueue),
      definition: {
        // nack(requeue=false) and the delivery limit route here: the parking lot.
        'dead-letter-exchange': RETRY_NAMES.parkingExchange,
        'dead-letter-routing-key': RETRY_NAMES.parkingRoutingKey,
        ...atLeastOnce,
        // Explicit, because the default differs across versions (none on 3.x, 20 on 4.x).
        'delivery-limit': options.deliveryLimit ?? RABBITMQ_DEFAULTS.deliveryLimit,
      },
    },
    ...rabbitRetryDelays(budget).map((delay) => ({
      name: retryQueueName(delay),
      pattern: exact(retryQueueName(delay)),
      definition: {
        // The delay itself: every message in this queue waits exactly this long…
        'message-ttl': delay,
        // …then goes back to inventory.orders only (not through `orders`).
        'dead-letter-exchange': RETRY_NAMES.requeueExchange,
        'dead-letter-routing-key': RETRY_NAMES.requeueRoutingKey,
        ...atLeastOnce,
        // …and a bound for when the requeue route is gone (the copies are held, not moved).
        'max-length': QUEUE_BOUNDS.retry.maxLength,
        overflow: QUEUE_BOUNDS.retry.overflow,
        // Nothing consumes a delay queue; a copy read there (an operator's "Get messages") must
        // not count towards RabbitMQ 4's default limit, over which it would leave early.
        'delivery-limit': UNLIMITED_DELIVERIES,
      },
    })),
    {
      name: RETRY_NAMES.parkingQueue,
      pattern: exact(RETRY_NAMES.parkingQueue),
      definition: {
        // Parked messages are kept for the parking retention, then dropped (no dead letter)…
        'message-ttl': retention.parkingMs,
        // …and beyond the bound a park is refused (held in inventory.orders), never dropped.
        'max-length': QUEUE_BOUNDS.parking.maxLength,
        overflow: QUEUE_BOUNDS.parking.overflow,
        // Reading the parking lot (`cli parked list`, a redrive's scan) returns every message it
        // read, and on RabbitMQ 4 each return counts: at the default limit of 20 the 21st read
        // would drop every parked message silently (no dead-letter exchange here; measured, 4.0.5).
        'delivery-limit': UNLIMITED_DELIVERIES,
      },
    },
    {
      // The tap nobody consumes here: bounded in length and age, oldest dropped first.
      name: RABBITMQ_NAMES.auditQueue,
      pattern: exact(RABBITMQ_NAMES.auditQueue),
      definition: {
        'max-length': QUEUE_BOUNDS.audit.maxLength,
        'message-ttl': QUEUE_BOUNDS.audit.messageTtlMs,
        overflow: QUEUE_BOUNDS.audit.overflow,
        // A tap may lose events: a poison one is dropped after this many deliveries, on every
        // version (RabbitMQ 4's default, stated so that 3.x does the same).
        'delivery-limit': QUEUE_BOUNDS.audit.deliveryLimit,
      },
    },
    {
      // Consumed by the order side; the bound is the safety net when that consumer is down.
      name: RABBITMQ_NAMES.inventoryResultsQueue,
      pattern: exact(RABBITMQ_NAMES.inventoryResultsQueue),
      definition: {
        'max-length': QUEUE_BOUNDS.inventoryResults.maxLength,
        // A result given back over and over (its database down) ends in its parking queue: on
        // RabbitMQ 4 a quorum queue without a dead-letter exchange drops it at the default limit
        // (20). Explicit limit, at-least-once (held here while the parking queue refuses).
        'dead-letter-exchange': RABBITMQ_NAMES.resultsParkingExchange,
        'dead-letter-routing-key': RABBITMQ_NAMES.resultsParkingRoutingKey,
        ...atLeastOnce,
        overflow: QUEUE_BOUNDS.inventoryResults.overflow,
        'delivery-limit': options.resultsDeliveryLimit ?? RABBITMQ_DEFAULTS.resultsDeliveryLimit,
      },
    },
    {
      // Kept for the parking retention like inventory's parking, refused beyond the bound.
      name: RABBITMQ_NAMES.resultsParkingQueue,
      pattern: exact(RABBITMQ_NAMES.resultsParkingQueue),
      definition: {
        'message-ttl': retention.parkingMs,
        'max-length': QUEUE_BOUNDS.resultsParking.maxLength,
        overflow: QUEUE_BOUNDS.resultsParking.overflow,
        // Read and moved by hand like inventory's parking: never dropped by a delivery count.
        'delivery-limit': UNLIMITED_DELIVERIES,
      },
    },
  ];
}

/** `major.minor` of a RabbitMQ version string (`3.10.8` → [3, 10]). */
function majorMinor(version: string): [number, number] {
  const [major = 0, minor = 0] = version.split('.').map((n) => Number.parseInt(n, 10) || 0);
  return [major, minor];
}

/**
 * A policy as the broker of `version` takes it: `apply-to` is `queues` before RabbitMQ 3.12
 * (where `quorum_queues` does not exist) and `quorum_queues` from 3.12 on (Amazon MQ requires it
 * for policies on quorum queues); an unlimited `delivery-limit` is -1 from 4.0 on and left out
 * before (3.x has no default limit and refuses -1).
 */
export function policyForBroker(
  policy: Policy,
  version: string,
): { pattern: string; 'apply-to': 'queues' | 'quorum_queues'; definition: Policy['definition'] } {
  const [major, minor] = majorMinor(version);
  const definition = { ...policy.definition };
  if (major < 4 && definition['delivery-limit'] === UNLIMITED_DELIVERIES) {
    delete definition['delivery-limit'];
  }
  return {
    pattern: policy.pattern,
    'apply-to': major > 3 || (major === 3 && minor >= 12) ? 'quorum_queues' : 'queues',
    definition,
  };
}

/** Applies the policies through the management API, each as the broker's version takes it. */
export async function applyPolicies(
  management: RabbitManagement,
  vhost: string,
  policies: Policy[],
  options: PolicyOptions = {},
): Promise<void> {
  const version = await management.version();
  for (const p of policies) {
    await management.request(
      'PUT',
      `/api/policies/${encodeURIComponent(vhost)}/${encodeURIComponent(p.name)}`,
      {
        ...policyForBroker(p, version),
        priority: options.priority ?? RABBITMQ_DEFAULTS.policyPriority,
      },
    );
  }
}

/** The virtual host an AMQP URL names (`/` when none). */
export function vhostOf(amqpUrl: string): string {
  const path = new URL(amqpUrl).pathname;
  return path.length > 1 ? decodeURIComponent(path.slice(1)) : '/';
}

/**
 * Declares the whole topology and applies its policies: what a consumer does at start (the
 * relay needs only the core). Idempotent.
 */
export async function prepareInventoryTopology(deps: {
  channel: (fn: (ch: Channel) => Promise<void>) => Promise<void>;
  management: RabbitManagement;
  vhost: string;
  budget: RetryBudget;
  retention: Retention;
  policy?: PolicyOptions;
}): Promise<void> {
  await deps.channel((ch) => declareTopology(ch, buildTopology(deps.budget)));
  await applyPolicies(
    deps.management,
    deps.vhost,
    buildPolicies(deps.budget, deps.retention, deps.policy),
    deps.policy,
  );
}

/** Everything `prepare` declares for a budget and retention (the deploy's custom resource digests it). */
export function declaredTopology(
  budget: RetryBudget,
  retention: Retention,
  options: PolicyOptions = {},
): { topology: TopologyDeclaration; policies: Policy[] } {
  return { topology: buildTopology(budget), policies: buildPolicies(budget, retention, options) };
}
