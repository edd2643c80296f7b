import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { METRICS_NAMESPACE } from '../../outbox/metrics.js';
import type { Inspection } from '../types.js';
import { RABBITMQ_NAMES, RETRY_NAMES } from './constants.js';

/** Queue metrics the RabbitMQ pipeline's alarms watch (namespace ReliableMessaging, dimension Queue). */
export const QUEUE_METRICS = {
  /** Ready + unacknowledged messages. */
  depth: 'QueueDepth',
  ready: 'QueueReady',
} as const;

/**
 * Publishes the depths of `inventory.orders` and its parking queue from the backend's
 * inspection. Amazon MQ vends no per-queue CloudWatch metrics for RabbitMQ 4 brokers and
 * recommends polling the management API once a minute or less often: the relay does it on its
 * one-minute schedule. Returns what it published, by queue.
 */
export function publishQueueMetrics(
  inspection: Inspection,
  serviceName = 'outbox-relay',
): Record<string, { depth: number; ready: number }> {
  const queues = {
    [RABBITMQ_NAMES.inventoryQueue]: {
      depth: inspection.ready + inspection.inFlight,
      ready: inspection.ready,
    },
    [RETRY_NAMES.parkingQueue]: { depth: inspection.parked, ready: inspection.parked },
  };
  for (const [queue, q] of Object.entries(queues)) {
    const m = new Metrics({
      namespace: METRICS_NAMESPACE,
      serviceName,
      defaultDimensions: { Queue: queue },
    });
    m.addMetric(QUEUE_METRICS.depth, MetricUnit.Count, q.depth);
    m.addMetric(QUEUE_METRICS.ready, MetricUnit.Count, q.ready);
    m.publishStoredMetrics();
  }
  return queues;
}
