import type { Logger } from '../../logger.js';
import { RABBITMQ_DEFAULTS } from './constants.js';
import type { RabbitManagement } from './RabbitManagement.js';
import type { TopologyDeclaration } from './topology.js';

/**
 * Missing-route detection (docs/design.md, "RabbitMQ topology"). `mandatory` only catches a
 * message that reaches no queue at all; with a tap like `audit.orders` bound to `order.#`, a lost
 * `inventory.orders` binding still routes every order event somewhere, the confirm arrives and
 * the relay would mark the row published although inventory never sees it. So the publisher also
 * checks that every declared binding of a consumer queue (not a tap) that matches a routing key
 * exists on the broker, from the management API (one request per exchange, cached for
 * `intervalMs`); a message whose route is missing fails as `route-missing`.
 */

/** One declared binding a publish to `exchange` depends on. */
export interface RequiredRoute {
  queue: string;
  pattern: string;
}

/** What the last look at one exchange's bindings found. */
export interface RouteStatus {
  exchange: string;
  /** The declared routes of consumer queues the broker does not have. */
  missing: RequiredRoute[];
  /** Missing bindings by consumer queue (0 for a queue whose routes all exist). */
  missingByQueue: Record<string, number>;
  checkedAt: number;
}

/**
 * A window of markings that a lost route may have swallowed, for one declared route: messages of
 * the keys it matches, marked published within [from, to] (epoch ms), are to be published again.
 */
export interface LostRoute extends RequiredRoute {
  exchange: string;
  from: number;
  to: number;
}

/** AMQP topic matching: `*` is one word, `#` zero or more words. */
export function topicMatches(pattern: string, routingKey: string): boolean {
  const p = pattern.split('.');
  const k = routingKey.split('.');
  const match = (i: number, j: number): boolean => {
    if (i === p.length) return j === k.length;
    if (p[i] === '#') {
      for (let n = j; n <= k.length; n++) if (match(i + 1, n)) return true;
      return false;
    }
    if (j === k.length) return false;
    return (p[i] === '*' || p[i] === k[j]) && match(i + 1, j + 1);
  };
  return match(0, 0);
}

/** The declared bindings from `exchange` to queues a consumer depends on (taps left out). */
export function requiredRoutes(topology: TopologyDeclaration, exchange: string): RequiredRoute[] {
  return topology.queues
    .filter((q) => !q.tap)
    .flatMap((q) =>
      q.bindings
        .filter((b) => b.exchange === exchange)
        .map((b) => ({ queue: q.name, pattern: b.pattern })),
    );
}

interface BindingInfo {
  destination: string;
  destination_type: string;
  routing_key: string;
}

/**
 * The cached view of the bindings a publisher needs. `status` answers from the cache while it is
 * younger than `intervalMs` and refreshes it otherwise (one request in flight per exchange);
 * `undefined` means "not known": no management API configured or it did not answer. Publishing
 * then goes on unverified (the management API is the operators' plane; it must not become the
 * outbox's dependency): the first failure is logged as a warning, the recovery as info.
 */
/** How stale a look that found a route missing may be before it fails a publish. */
const MISSING_RECHECK_MS = 1_000;

/** What the looks so far say of one declared route. */
interface RouteHistory {
  /** When the last look that found it present was sent (epoch ms). */
  presentAt?: number;
  /** Since a look found it missing: the republish window, and whether it is covered. */
  lost?: { from: number; to: number; covered: boolean };
}

/**
 * Republishing what a lost route swallowed. A publisher sends on the strength of a look up to
 * `intervalMs` old, so messages of a key whose consumer route was lost after the last good look
 * were confirmed (a tap took them) and marked. Each look records, per declared route:
 *
 * - a look that finds it missing opens a loss (if none is open) with the window `from` = the last
 *   look that found it present (when sent), or `lookbackMs` back when this process never saw it,
 *   and `to` = this look plus `staleMs` (the longest any publisher may still mark on a look that
 *   predates the loss: the interval, a look's timeout, a batch's confirms), both less/plus
 *   `marginMs`; it records the window as a loss to take (`takeLosses`);
 * - every later look records it again, as long as the look before was not past `to`: rows other
 *   relays marked after an earlier republish are caught by the next one;
 * - the first look that finds it present again records it once more (unless covered) and closes
 *   it: other relays may have marked, on an old look, until the route came back.
 *
 * So every row marked between a route's loss and the end of every publisher's stale look is put
 * back by some look of this process, at the cost of copies of rows that had reached the queue.
 * A loss that no look sees (lost and restored between two looks) is not seen at all.
 */
export class RouteCheck {
  private readonly intervalMs: number;
  private readonly timeoutMs: number;
  /** The last look per exchange; `status: undefined` (not known) is cached too. */
  private readonly cache = new Map<string, { status: RouteStatus | undefined; at: number }>();
  private readonly inFlight = new Map<string, Promise<RouteStatus | undefined>>();
  private unavailableLogged = false;
  private readonly required = new Map<string, RequiredRoute[]>();
  private readonly staleMs: number;
  private readonly marginMs: number;
  private readonly lookbackMs: number;
  private readonly history = new Map<string, RouteHistory>();
  /** Losses recorded and not yet taken, by exchange, one per route (windows merged). */
  private readonly pending = new Map<string, Map<string, LostRoute>>();

  constructor(
    private readonly deps: {
      management: (() => Promise<RabbitManagement>) | undefined;
      vhost: string;
      topology: TopologyDeclaration;
      logger?: Logger | undefined;
      /** Called after every fresh look (the deployed functions publish `RouteMissing`). */
      onStatus?: ((status: RouteStatus) => void) | undefined;
    },
    options: {
      intervalMs?: number | undefined;
      timeoutMs?: number | undefined;
      /**
       * How long after a look a publisher may still mark a message it sent on that look (default:
       * the interval, the look's timeout and the default confirm timeout).
       */
      staleMs?: number | undefined;
      marginMs?: number | undefined;
      lookbackMs?: number | undefined;
    } = {},
  ) {
    this.intervalMs = options.intervalMs ?? RABBITMQ_DEFAULTS.routeCheckIntervalMs;
    this.timeoutMs = options.timeoutMs ?? RABBITMQ_DEFAULTS.routeCheckTimeoutMs;
    this.staleMs =
      options.staleMs ?? this.intervalMs + this.timeoutMs + RABBITMQ_DEFAULTS.confirmTimeoutMs;
    this.marginMs = options.marginMs ?? RABBITMQ_DEFAULTS.routeLossMarginMs;
    this.lookbackMs = options.lookbackMs ?? RABBITMQ_DEFAULTS.routeLossLookbackMs;
  }

  /** The losses of `exchange` recorded since the last take (see the class comment), taken. */
  takeLosses(exchange: string): LostRoute[] {
    const byRoute = this.pending.get(exchange);
    if (!byRoute || byRoute.size === 0) return [];
    this.pending.delete(exchange);
    return [...byRoute.values()];
  }

  /** Gives back losses taken and not acted on: the next take returns them (merged). */
  returnLosses(losses: readonly LostRoute[]): void {
    for (const loss of losses) this.record(loss);
  }

  private record(loss: LostRoute): void {
    let byRoute = this.pending.get(loss.exchange);
    if (!byRoute) {
      byRoute = new Map();
      this.pending.set(loss.exchange, byRoute);
    }
    const key = `${loss.queue}\u0000${loss.pattern}`;
    const before = byRoute.get(key);
    byRoute.set(
      key,
      before
        ? { ...loss, from: Math.min(before.from, loss.from), to: Math.max(before.to, loss.to) }
        : { ...loss },
    );
  }

  /** Updates the history of each declared route with one look (sent at `sentAt`, answered now). */
  private track(exchange: string, missing: readonly RequiredRoute[], sentAt: number): void {
    const now = Date.now();
    const gone = new Set(missing.map((r) => `${r.queue}\u0000${r.pattern}`));
    for (const route of this.routesOf(exchange)) {
      const key = `${route.queue}\u0000${route.pattern}`;
      const h = this.history.get(`${exchange}\u0000${key}`) ?? {};
      this.history.set(`${exchange}\u0000${key}`, h);
      if (gone.has(key)) {
        h.lost ??= {
          from: (h.presentAt ?? sentAt - this.lookbackMs) - this.marginMs,
          to: now + this.staleMs + this.marginMs,
          covered: false,
        };
      } else {
        h.presentAt = sentAt;
      }
      const lost = h.lost;
      if (!lost) continue;
      if (!lost.covered) this.record({ exchange, ...route, from: lost.from, to: lost.to });
      // a look past the window's end covers it: every row marked in it was marked before this look
      if (sentAt > lost.to) lost.covered = true;
      if (!gone.has(key)) h.lost = undefined;
    }
  }

  /** The routes of `exchange`, from the cache when fresh enough (`maxAgeMs`, default the interval). */
  status(exchange: string, maxAgeMs = this.intervalMs): Promise<RouteStatus | undefined> {
    const cached = this.cache.get(exchange);
    if (cached && Date.now() - cached.at < maxAgeMs) return Promise.resolve(cached.status);
    let p = this.inFlight.get(exchange);
    if (!p) {
      p = this.refresh(exchange)
        .then((status) => {
          this.cache.set(exchange, { status, at: Date.now() });
          return status;
        })
        .finally(() => this.inFlight.delete(exchange));
      this.inFlight.set(exchange, p);
    }
    return p;
  }

  /**
   * For each routing key of a batch, the description of its missing routes (absent: every route
   * exists, or the check could not run). Cheap when the cache is fresh: no I/O.
   */
  async missingFor(
    exchange: string,
    routingKeys: Iterable<string>,
  ): Promise<Map<string, string> | undefined> {
    if (this.routesOf(exchange).length === 0) return undefined;
    let status = await this.status(exchange);
    // A missing route is looked at again before it fails a publish (at most once a second), so a
    // restored binding is seen at once instead of charging attempts for up to the interval.
    if (status && status.missing.length > 0)
      status = await this.status(exchange, MISSING_RECHECK_MS);
    if (!status || status.missing.length === 0) return undefined;
    const out = new Map<string, string>();
    for (const key of routingKeys) {
      const gone = status.missing.filter((r) => topicMatches(r.pattern, key));
      if (gone.length > 0) {
        out.set(
          key,
          `no binding ${gone.map((r) => `${exchange} → ${r.queue} (${r.pattern})`).join(', ')} on the broker`,
        );
      }
    }
    return out.size > 0 ? out : undefined;
  }

  private routesOf(exchange: string): RequiredRoute[] {
    let r = this.required.get(exchange);
    if (!r) {
      r = requiredRoutes(this.deps.topology, exchange);
      this.required.set(exchange, r);
    }
    return r;
  }

  private async refresh(exchange: string): Promise<RouteStatus | undefined> {
    const required = this.routesOf(exchange);
    if (!this.deps.management) {
      this.unavailable('no management API configured');
      return undefined;
    }
    const management = this.deps.management;
    const sentAt = Date.now();
    let bindings: BindingInfo[] | undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      // A slow management API must not hold the relay's batches: give up after `timeoutMs`.
      bindings = await Promise.race([
        management().then((m) =>
          m.request<BindingInfo[]>(
            'GET',
            `/api/exchanges/${encodeURIComponent(this.deps.vhost)}/${encodeURIComponent(exchange)}/bindings/source`,
          ),
        ),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no answer within ${this.timeoutMs} ms`)),
            this.timeoutMs,
          );
        }),
      ]);
    } catch (err) {
      this.unavailable((err as Error).message);
      return undefined;
    } finally {
      clearTimeout(timer);
    }
    if (this.unavailableLogged) {
      this.unavailableLogged = false;
      this.deps.logger?.info('route check: the management API answers again', { exchange });
    }
    // A missing exchange answers an empty list (3.10; `undefined` on a 404): every route is missing.
    const present = new Set(
      (bindings ?? [])
        .filter((b) => b.destination_type === 'queue')
        .map((b) => `${b.destination}\u0000${b.routing_key}`),
    );
    const missing = required.filter((r) => !present.has(`${r.queue}\u0000${r.pattern}`));
    const missingByQueue: Record<string, number> = {};
    for (const r of required) missingByQueue[r.queue] ??= 0;
    for (const r of missing) missingByQueue[r.queue] = (missingByQueue[r.queue] ?? 0) + 1;
    const status: RouteStatus = { exchange, missing, missingByQueue, checkedAt: Date.now() };
    const before = this.cache.get(exchange)?.status?.missing.length ?? 0;
    if (missing.length > 0 && before === 0) {
      this.deps.logger?.error('route check: declared routes are missing on the broker', {
        exchange,
        missing,
      });
    } else if (missing.length === 0 && before > 0) {
      this.deps.logger?.info('route check: every declared route exists again', { exchange });
    }
    this.track(exchange, missing, sentAt);
    this.deps.onStatus?.(status);
    return status;
  }

  private unavailable(error: string): void {
    if (this.unavailableLogged) return;
    this.unavailableLogged = true;
    this.deps.logger?.warn('route check unavailable: publishing without verifying routes', {
      error,
    });
  }
}
