import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { METRICS_NAMESPACE } from '../../outbox/metrics.js';
import type { RabbitManagement } from './RabbitManagement.js';

/** Queue metrics the RabbitMQ pipeline's alarms watch (namespace ReliableMessaging, dimension Queue). */
export const QUEUE_METRICS = {
  /** Ready + unacknowledged messages. */
  depth: 'QueueDepth',
  ready: 'QueueReady',
} as const;

interface QueueInfo {
  messages?: number;
  messages_ready?: number;
}

/**
 * Publishes queue depths read from the management API. Amazon MQ vends no per-queue CloudWatch
 * metrics for RabbitMQ 4 brokers and recommends polling the management API once a minute or
 * less often: the relay does it on its one-minute schedule. A missing queue reports nothing.
 */
export async function publishQueueMetrics(
  management: RabbitManagement,
  vhost: string,
  queues: readonly string[],
  serviceName = 'outbox-relay',
): Promise<Record<string, QueueInfo>> {
  const seen: Record<string, QueueInfo> = {};
  for (const queue of queues) {
    const info = await management.request<QueueInfo>(
      'GET',
      `/api/queues/${encodeURIComponent(vhost)}/${encodeURIComponent(queue)}`,
    );
    if (!info) continue;
    seen[queue] = info;
    const m = new Metrics({
      namespace: METRICS_NAMESPACE,
      serviceName,
      defaultDimensions: { Queue: queue },
    });
    m.addMetric(QUEUE_METRICS.depth, MetricUnit.Count, info.messages ?? 0);
    m.addMetric(QUEUE_METRICS.ready, MetricUnit.Count, info.messages_ready ?? 0);
    m.publishStoredMetrics();
  }
  return seen;
}
