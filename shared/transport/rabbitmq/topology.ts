import type { Channel } from 'amqplib';
import { type Retention, type RetryBudget, rabbitRetryDelays } from '../../config/budget.js';
import { ConfigError } from '../../config/errors.js';
import { type Stream, type Subscription, subscriptionOf, type Topology } from '../../port/types.js';
import { QUEUE_BOUNDS, RABBITMQ_DEFAULTS } from './constants.js';
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

/** A consumer queue of a subscription, and the names derived from it. */
export interface RabbitQueueNames {
  subscription: string;
  queue: string;
  /** The exchange of the subscription's stream, and the patterns the queue is bound with. */
  exchange: string;
  bindings: readonly string[];
  failures: Subscription['failures'];
  /** `retries`: retry copies go here with the delay (ms) as routing key… */
  retryExchange: string;
  /** …and expire back through this exchange, bound only to the queue, with this key. */
  requeueExchange: string;
  requeueRoutingKey: string;
  /** Where its parked messages go (the consumer's park copies, the broker's dead letters). */
  parkingExchange: string;
  parkingQueue: string;
  parkingRoutingKey: string;
}

/** A queue bound to a stream that nothing here consumes (`Topology.taps`). */
export interface RabbitTapNames {
  queue: string;
  exchange: string;
  bindings: readonly string[];
}

/** The RabbitMQ names of a topology. */
export interface RabbitNames {
  /** A topic exchange per stream: the stream's destination. */
  exchanges: Record<Stream, string>;
  /** Consumer queues, grouped by stream in the topology's order. */
  queues: RabbitQueueNames[];
  taps: RabbitTapNames[];
}

/** The suffixes of the exchanges derived from a queue: never the name of a stream's exchange. */
const OWN_SUFFIXES = /\.(retry|requeue|dlx)$/;

/** Whether `exchange` is one a retry, redrive or park copy goes through (not an event's route). */
export const isOwnExchange = (exchange: string) => OWN_SUFFIXES.test(exchange);

/**
 * A topology's RabbitMQ names: each stream's topic exchange is its destination; each
 * subscription's queue is bound to it by its types; a queue `q` retries through `q.retry`
 * (queues `q.retry.<ms>`), comes back through `q.requeue` (key `q`) and parks through `q.dlx`
 * into `q.parking` (key `q.parking`).
 */
export function rabbitNames(topology: Topology): RabbitNames {
  const exchanges: Record<Stream, string> = {};
  for (const [stream, destination] of Object.entries(topology.streams)) {
    if (isOwnExchange(destination)) {
      throw new ConfigError(
        `stream "${stream}": an exchange ending in .retry, .requeue or .dlx is the backend's own`,
      );
    }
    exchanges[stream] = destination;
  }
  const queues: RabbitQueueNames[] = [];
  const taps: RabbitTapNames[] = [];
  // grouped by stream, subscriptions before taps: the order they are declared in
  for (const stream of Object.keys(exchanges)) {
    const exchange = exchanges[stream] as string;
    for (const [subscription, sub] of Object.entries(topology.subscriptions)) {
      if (sub.stream !== stream) continue;
      const q = sub.queue;
      queues.push({
        subscription,
        queue: q,
        exchange,
        bindings: sub.types,
        failures: sub.failures,
        retryExchange: `${q}.retry`,
        requeueExchange: `${q}.requeue`,
        requeueRoutingKey: q,
        parkingExchange: `${q}.dlx`,
        parkingQueue: `${q}.parking`,
        parkingRoutingKey: `${q}.parking`,
      });
    }
    for (const tap of topology.taps ?? []) {
      if (tap.stream === stream) taps.push({ queue: tap.queue, exchange, bindings: tap.types });
    }
  }
  return { exchanges, queues, taps };
}

/** The queue of subscription `name` (default: the topology's first). */
export function queueNamesOf(names: RabbitNames, topology: Topology, name?: string) {
  const chosen = subscriptionOf(topology, name).name;
  return names.queues.find((q) => q.subscription === chosen) as RabbitQueueNames;
}

/** The retry queue of one delay bucket. */
export const retryQueueOf = (q: RabbitQueueNames, delayMs: number) =>
  `${q.retryExchange}.${delayMs}`;

/** The exchanges and queues publishing needs: every stream's exchange, every queue bound to it. */
export function coreTopology(names: RabbitNames): TopologyDeclaration {
  const queuesOf = (exchange: string) => [
    ...names.queues
      .filter((q) => q.exchange === exchange)
      .map((q) => ({
        name: q.queue,
        bindings: q.bindings.map((pattern) => ({ exchange, pattern })),
      })),
    ...names.taps
      .filter((t) => t.exchange === exchange)
      .map((t) => ({
        name: t.queue,
        bindings: t.bindings.map((pattern) => ({ exchange, pattern })),
        tap: true as const,
      })),
  ];
  return {
    exchanges: Object.values(names.exchanges).map((name) => ({ name, type: 'topic' as const })),
    queues: Object.values(names.exchanges).flatMap(queuesOf),
  };
}

/**
 * The core plus each consumer queue's delayed retries and parking lot. One retry queue per delay
 * (a quorum queue expires messages only at its head: mixed delays in one queue would hold short
 * ones behind long ones). Expired retries dead-letter through an exchange bound only to their
 * queue: dead-lettering back into the stream's exchange would copy the retry into every other
 * queue bound there (a tap).
 */
export function buildTopology(names: RabbitNames, budget: RetryBudget): TopologyDeclaration {
  const delays = rabbitRetryDelays(budget);
  const core = coreTopology(names);
  const retrying = names.queues.filter((q) => q.failures === 'retries');
  return {
    exchanges: [
      ...core.exchanges,
      ...names.queues.flatMap((q) => [
        ...(q.failures === 'retries'
          ? [
              { name: q.retryExchange, type: 'direct' as const },
              { name: q.requeueExchange, type: 'direct' as const },
            ]
          : []),
        { name: q.parkingExchange, type: 'direct' as const },
      ]),
    ],
    queues: [
      ...core.queues.map((declared) => {
        const q = retrying.find((r) => r.queue === declared.name);
        return q
          ? {
              ...declared,
              bindings: [
                ...declared.bindings,
                { exchange: q.requeueExchange, pattern: q.requeueRoutingKey },
              ],
            }
          : declared;
      }),
      ...names.queues.flatMap((q) => [
        ...(q.failures === 'retries'
          ? delays.map((d) => ({
              name: retryQueueOf(q, d),
              bindings: [{ exchange: q.retryExchange, pattern: String(d) }],
            }))
          : []),
        {
          name: q.parkingQueue,
          bindings: [{ exchange: q.parkingExchange, pattern: q.parkingRoutingKey }],
        },
      ]),
    ],
  };
}

export async function declareTopology(ch: Channel, topology: TopologyDeclaration): Promise<void> {
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
  names: RabbitNames,
  budget: RetryBudget,
  retention: Retention,
  options: PolicyOptions = {},
): Policy[] {
  // at-least-once dead lettering: the source queue keeps a dead-lettered message until the target
  // queue confirms it, so a parking (or requeue) route that is missing loses nothing. It requires
  // `overflow: reject-publish` (publishers are refused rather than old messages dropped).
  const atLeastOnce = { 'dead-letter-strategy': 'at-least-once', overflow: 'reject-publish' };
  const policy = (name: string, definition: Policy['definition']): Policy => ({
    name,
    pattern: exact(name),
    definition,
  });
  const retrying = (q: RabbitQueueNames): Policy[] => [
    policy(q.queue, {
      // nack(requeue=false) and the delivery limit route here: the parking lot.
      'dead-letter-exchange': q.parkingExchange,
      'dead-letter-routing-key': q.parkingRoutingKey,
      ...atLeastOnce,
      // Explicit, because the default differs across versions (none on 3.x, 20 on 4.x).
      'delivery-limit': options.deliveryLimit ?? RABBITMQ_DEFAULTS.deliveryLimit,
    }),
    ...rabbitRetryDelays(budget).map((delay) =>
      policy(retryQueueOf(q, delay), {
        // The delay itself: every message in this queue waits exactly this long…
        'message-ttl': delay,
        // …then goes back to its queue only (not through the stream's exchange).
        'dead-letter-exchange': q.requeueExchange,
        'dead-letter-routing-key': q.requeueRoutingKey,
        ...atLeastOnce,
        // …and a bound for when the requeue route is gone (the copies are held, not moved).
        'max-length': QUEUE_BOUNDS.retry.maxLength,
        overflow: QUEUE_BOUNDS.retry.overflow,
        // Nothing consumes a delay queue; a copy read there (an operator's "Get messages") must
        // not count towards RabbitMQ 4's default limit, over which it would leave early.
        'delivery-limit': UNLIMITED_DELIVERIES,
      }),
    ),
    policy(q.parkingQueue, {
      // Parked messages are kept for the parking retention, then dropped (no dead letter)…
      'message-ttl': retention.parkingMs,
      // …and beyond the bound a park is refused (held in its queue), never dropped.
      'max-length': QUEUE_BOUNDS.parking.maxLength,
      overflow: QUEUE_BOUNDS.parking.overflow,
      // Reading the parking lot (`cli parked list`, a redrive's scan) returns every message it
      // read, and on RabbitMQ 4 each return counts: at the default limit of 20 the 21st read
      // would drop every parked message silently (no dead-letter exchange here; measured, 4.0.5).
      'delivery-limit': UNLIMITED_DELIVERIES,
    }),
  ];
  const redelivering = (q: RabbitQueueNames): Policy[] => [
    policy(q.queue, {
      // the bound is the safety net when its consumer is down
      'max-length': QUEUE_BOUNDS.inventoryResults.maxLength,
      // A message given back over and over (its database down) ends in its parking queue: on
      // RabbitMQ 4 a quorum queue without a dead-letter exchange drops it at the default limit
      // (20). Explicit limit, at-least-once (held here while the parking queue refuses).
      'dead-letter-exchange': q.parkingExchange,
      'dead-letter-routing-key': q.parkingRoutingKey,
      ...atLeastOnce,
      overflow: QUEUE_BOUNDS.inventoryResults.overflow,
      'delivery-limit': options.resultsDeliveryLimit ?? RABBITMQ_DEFAULTS.resultsDeliveryLimit,
    }),
    policy(q.parkingQueue, {
      // kept for the parking retention like a retrying queue's parking, refused beyond the bound
      'message-ttl': retention.parkingMs,
      'max-length': QUEUE_BOUNDS.resultsParking.maxLength,
      overflow: QUEUE_BOUNDS.resultsParking.overflow,
      // read and moved by hand: never dropped by a delivery count
      'delivery-limit': UNLIMITED_DELIVERIES,
    }),
  ];
  const tap = (t: RabbitTapNames): Policy =>
    policy(t.queue, {
      // nobody consumes it here: bounded in length and age, oldest dropped first
      'max-length': QUEUE_BOUNDS.audit.maxLength,
      'message-ttl': QUEUE_BOUNDS.audit.messageTtlMs,
      overflow: QUEUE_BOUNDS.audit.overflow,
      // A tap may lose events: a poison one is dropped after this many deliveries, on every
      // version (RabbitMQ 4's default, stated so that 3.x does the same).
      'delivery-limit': QUEUE_BOUNDS.audit.deliveryLimit,
    });
  return Object.values(names.exchanges).flatMap((exchange) => [
    ...names.queues
      .filter((q) => q.exchange === exchange)
      .flatMap((q) => (q.failures === 'retries' ? retrying(q) : redelivering(q))),
    ...names.taps.filter((t) => t.exchange === exchange).map(tap),
  ]);
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
export async function prepareTopology(deps: {
  channel: (fn: (ch: Channel) => Promise<void>) => Promise<void>;
  management: RabbitManagement;
  vhost: string;
  names: RabbitNames;
  budget: RetryBudget;
  retention: Retention;
  policy?: PolicyOptions;
}): Promise<void> {
  await deps.channel((ch) => declareTopology(ch, buildTopology(deps.names, deps.budget)));
  await applyPolicies(
    deps.management,
    deps.vhost,
    buildPolicies(deps.names, deps.budget, deps.retention, deps.policy),
    deps.policy,
  );
}

/**
 * Everything `prepare` declares for a topology, budget and retention (the deploy's custom
 * resource digests it).
 */
export function declaredTopology(
  topology: Topology,
  budget: RetryBudget,
  retention: Retention,
  options: PolicyOptions = {},
): { topology: TopologyDeclaration; policies: Policy[] } {
  const names = rabbitNames(topology);
  return {
    topology: buildTopology(names, budget),
    policies: buildPolicies(names, budget, retention, options),
  };
}
