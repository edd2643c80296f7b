import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { METRICS_NAMESPACE } from '../../config/constants.js';
import type { Logger } from '../../logger.js';
import type { Inspection } from '../../port/types.js';
import { QUEUE_METRICS } from './constants.js';
import type { RouteStatus } from './routes.js';

/** What the RabbitMQ backend's `inspect()` adds for the metrics. */
export interface RabbitInspection extends Inspection {
  /** The queue the counts are of (the first subscription's), and its parking queue. */
  queue: string;
  parkingQueue: string;
  /** Ready messages of the queues bounded by policy (audit, results, results parking, retry delays). */
  bounded?: Record<string, number>;
  /** Missing declared bindings per consumer queue; absent when the routes could not be looked at. */
  routesMissing?: Record<string, number> | undefined;
}

/** What `publishQueueMetrics` published for one queue (`held`: `inventory.orders` only). */
export interface PublishedQueueMetrics {
  depth: number;
  ready: number;
  routeMissing?: number;
  held?: number;
}

const queueMetrics = (serviceName: string, queue: string) =>
  new Metrics({ namespace: METRICS_NAMESPACE, serviceName, defaultDimensions: { Queue: queue } });

/**
 * Publishes the depths of `inventory.orders`, its parking queue and the bounded queues
 * (`audit.orders`, `orders.inventory-results`, `orders.inventory-results.parking`, each retry
 * delay queue) from the
 * backend's inspection, and `RouteMissing`
 * per consumer queue when the routes could be looked at. Amazon MQ vends no per-queue CloudWatch
 * metrics for RabbitMQ 4 brokers and recommends polling the management API once a minute or less
 * often: the relay does it on its one-minute schedule. Also `HeldForDeadLettering` of
 * `inventory.orders` (parking refused those messages). Returns what it published, by queue.
 */
export function publishQueueMetrics(
  inspection: RabbitInspection,
  serviceName = 'outbox-relay',
): Record<string, PublishedQueueMetrics> {
  const queues: Record<string, PublishedQueueMetrics> = {
    [inspection.queue]: {
      depth: inspection.ready + inspection.inFlight,
      ready: inspection.ready,
      held: inspection.heldForDeadLettering,
    },
    [inspection.parkingQueue]: { depth: inspection.parked, ready: inspection.parked },
  };
  for (const [queue, ready] of Object.entries(inspection.bounded ?? {})) {
    queues[queue] = { depth: ready, ready };
  }
  for (const [queue, missing] of Object.entries(inspection.routesMissing ?? {})) {
    queues[queue] = { depth: 0, ready: 0, ...queues[queue], routeMissing: missing };
  }
  for (const [queue, q] of Object.entries(queues)) {
    const m = queueMetrics(serviceName, queue);
    m.addMetric(QUEUE_METRICS.depth, MetricUnit.Count, q.depth);
    m.addMetric(QUEUE_METRICS.ready, MetricUnit.Count, q.ready);
    if (q.routeMissing !== undefined) {
      m.addMetric(QUEUE_METRICS.routeMissing, MetricUnit.Count, q.routeMissing);
    }
    if (q.held !== undefined) {
      m.addMetric(QUEUE_METRICS.heldForDeadLettering, MetricUnit.Count, q.held);
    }
    m.publishStoredMetrics();
  }
  return queues;
}

/** `RouteMissing` per consumer queue of one look at an exchange's routes (the publishers' check). */
export function publishRouteStatus(status: RouteStatus, serviceName = 'outbox-relay'): void {
  for (const [queue, missing] of Object.entries(status.missingByQueue)) {
    const m = queueMetrics(serviceName, queue);
    m.addMetric(QUEUE_METRICS.routeMissing, MetricUnit.Count, missing);
    m.publishStoredMetrics();
  }
}

/**
 * One look at the broker's queues for the alarms (the relay's report, each invocation): the
 * depths and routes of `inspect()` ({@link publishQueueMetrics}) and `QueueMetricsAvailable` 1;
 * when the inspection fails, or could not look at the routes (the management API did not answer),
 * `QueueMetricsAvailable` 0 and whatever it could read. Never throws: a broker that cannot be read
 * must not fail the relay. Returns whether the metrics were available.
 */
export async function reportQueueMetrics(
  inspect: () => Promise<RabbitInspection>,
  logger?: Logger,
  serviceName = 'outbox-relay',
): Promise<boolean> {
  let available = false;
  try {
    const inspection = await inspect();
    publishQueueMetrics(inspection, serviceName);
    available = inspection.routesMissing !== undefined;
    if (!available) logger?.warn('queue metrics unavailable: the routes could not be looked at');
  } catch (err) {
    logger?.warn('queue metrics unavailable', { error: String(err) });
  }
  const m = new Metrics({ namespace: METRICS_NAMESPACE, serviceName });
  m.addMetric(QUEUE_METRICS.available, MetricUnit.Count, available ? 1 : 0);
  m.publishStoredMetrics();
  return available;
}
