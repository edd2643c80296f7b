import { z } from 'zod';
import type { Retention, RetryBudget } from '../../config/budget.js';
import { ConfigError, type Env } from '../../config/env.js';
import type { ParkRefused } from '../../consumer/driver.js';
import type { Logger } from '../../logger.js';
import type { Topology } from '../../port/types.js';
import { backendBaseSchema, resolvable, url } from '../module.js';
import { type BrokerCredentials, withCredentials } from './brokerSecret.js';
import { publishRouteStatus } from './queueMetrics.js';
import type { RouteStatus } from './routes.js';
import { vhostOf } from './topology.js';

/** Where the broker is and how this backend uses it. */
export interface RabbitMqBackendConfig {
  /**
   * The AMQP URL (with its virtual host), or a function that resolves it on first connect
   * (deployed functions read the Amazon MQ credentials from Secrets Manager then).
   */
  url: string | (() => Promise<string>);
  /** The management API URL with credentials, or a resolver; needed by `prepare` and `inspect`. */
  managementUrl?: string | (() => Promise<string>);
  /** The virtual host the URL names (policies are applied there). */
  vhost: string;
  budget: RetryBudget;
  retention: Retention;
  /** Who parks, for diagnoses (`inventory@<version>`). */
  consumer: string;
  /** The streams and subscriptions, by name (`Topology`). */
  topology: Topology;
  /** Quorum-queue delivery limit of `inventory.orders` (the broker's own backstop). */
  deliveryLimit?: number;
  /** Quorum-queue delivery limit of `orders.inventory-results` (then its parking queue). */
  resultsDeliveryLimit?: number;
  connectionName?: string;
  publish?: { window?: number; confirmTimeoutMs?: number; connectTimeoutMs?: number };
  /** Reconnect backoff; it starts over only after a connection stayed up `healthyAfterMs`. */
  reconnect?: { baseMs?: number; maxMs?: number; healthyAfterMs?: number };
  /**
   * The heartbeat timeout the connection asks for (s; default 10): the broker closes a connection
   * that sent nothing for about twice that, and requeues its unacknowledged deliveries.
   */
  heartbeatSeconds?: number;
  /**
   * Publishers verify the declared routes to consumer queues (management API, cached for
   * `intervalMs`); `false` turns it off. Default on.
   */
  routeCheck?:
    | false
    | {
        intervalMs?: number;
        timeoutMs?: number;
        /** Widening of a lost route's republish window (`RABBITMQ_DEFAULTS.routeLossMarginMs`). */
        marginMs?: number;
        /** A lost route never seen present: how far back (`RABBITMQ_DEFAULTS.routeLossLookbackMs`). */
        lookbackMs?: number;
      };
  /** Called after each fresh look at the routes (deployed: the `RouteMissing` metric). */
  onRouteStatus?: (status: RouteStatus) => void;
  /** Called when parking refused a consumer's copy (deployed: the `ParkRefused` metric). */
  onParkRefused?: (refused: ParkRefused) => void;
  /**
   * `reportMetrics` publishes the queue depths and routes of `inspect()` and
   * `QueueMetricsAvailable` (deployed on Amazon MQ: its RabbitMQ 4 brokers vend no per-queue
   * metrics). Default off.
   */
  queueMetrics?: boolean;
  logger?: Logger;
}

/**
 * The RabbitMQ backend's configuration from the runtime environment: the local broker
 * (`AMQP_URL`, `RABBITMQ_MANAGEMENT_URL`), or the deployed Amazon MQ broker when
 * `BROKER_SECRET_ARN` is set (its endpoints and virtual host from the environment, the
 * credentials from `credentials()`, read on first connect and never from the environment).
 */
export function rabbitmqConfigFromEnv(
  env: Env,
  base: Pick<RabbitMqBackendConfig, 'budget' | 'retention' | 'consumer' | 'topology'> &
    Partial<RabbitMqBackendConfig> & {
      credentials?: () => Promise<BrokerCredentials>;
    },
): RabbitMqBackendConfig {
  const { credentials, ...rest } = base;
  const publish = {
    window: env.PUBLISH_WINDOW,
    confirmTimeoutMs: env.PUBLISH_TIMEOUT_MS,
    ...base.publish,
  };
  if (!env.BROKER_SECRET_ARN) {
    return {
      url: env.AMQP_URL,
      managementUrl: env.RABBITMQ_MANAGEMENT_URL,
      vhost: vhostOf(env.AMQP_URL),
      ...rest,
      publish,
    };
  }
  if (!credentials) throw new ConfigError('BROKER_SECRET_ARN is set but no credentials reader');
  const amqp = env.BROKER_AMQP_ENDPOINT;
  const management = env.BROKER_MANAGEMENT_ENDPOINT;
  if (!amqp) throw new ConfigError('BROKER_AMQP_ENDPOINT is not set');
  return {
    url: async () => withCredentials(amqp, await credentials(), env.BROKER_VHOST),
    ...(management
      ? { managementUrl: async () => withCredentials(management, await credentials()) }
      : {}),
    vhost: env.BROKER_VHOST,
    // Deployed: every fresh look at the routes is a `RouteMissing` datapoint at once, so a lost
    // route alarms within the alarm's one-minute period (not only at the relay's report).
    onRouteStatus: (status) => publishRouteStatus(status),
    queueMetrics: true,
    ...rest,
    publish,
  };
}

const fn = <F>() => z.custom<F>((v) => typeof v === 'function');
const positive = z.number().int().positive();

/** What `RabbitMqBackendConfig` must hold, checked before the backend is built. */
export const rabbitmqConfigSchema = backendBaseSchema.extend({
  url: resolvable(z.string().regex(/^amqps?:\/\//, 'an amqp:// or amqps:// URL')),
  managementUrl: resolvable(url()).optional(),
  vhost: z.string().min(1),
  deliveryLimit: positive.optional(),
  resultsDeliveryLimit: positive.optional(),
  connectionName: z.string().optional(),
  publish: z
    .object({
      window: positive.optional(),
      confirmTimeoutMs: positive.optional(),
      connectTimeoutMs: positive.optional(),
    })
    .optional(),
  reconnect: z
    .object({
      baseMs: positive.optional(),
      maxMs: positive.optional(),
      healthyAfterMs: z.number().int().nonnegative().optional(),
    })
    .optional(),
  heartbeatSeconds: z.number().int().nonnegative().optional(),
  routeCheck: z
    .union([
      z.literal(false),
      z.object({
        intervalMs: z.number().int().nonnegative().optional(),
        timeoutMs: positive.optional(),
        marginMs: z.number().int().nonnegative().optional(),
        lookbackMs: z.number().int().nonnegative().optional(),
      }),
    ])
    .optional(),
  onRouteStatus: fn<(status: RouteStatus) => void>().optional(),
  onParkRefused: fn<(refused: ParkRefused) => void>().optional(),
  queueMetrics: z.boolean().optional(),
});
