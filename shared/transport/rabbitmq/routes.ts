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

export class RouteCheck {
  private readonly intervalMs: number;
  private readonly timeoutMs: number;
  /** The last look per exchange; `status: undefined` (not known) is cached too. */
  private readonly cache = new Map<string, { status: RouteStatus | undefined; at: number }>();
  private readonly inFlight = new Map<string, Promise<RouteStatus | undefined>>();
  private unavailableLogged = false;
  private readonly required = new Map<string, RequiredRoute[]>();

  constructor(
    private readonly deps: {
      management: (() => Promise<RabbitManagement>) | undefined;
      vhost: string;
      topology: TopologyDeclaration;
      logger?: Logger | undefined;
      /** Called after every fresh look (the deployed functions publish `RouteMissing`). */
      onStatus?: ((status: RouteStatus) => void) | undefined;
    },
    options: { intervalMs?: number | undefined; timeoutMs?: number | undefined } = {},
  ) {
    this.intervalMs = options.intervalMs ?? RABBITMQ_DEFAULTS.routeCheckIntervalMs;
    this.timeoutMs = options.timeoutMs ?? RABBITMQ_DEFAULTS.routeCheckTimeoutMs;
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
