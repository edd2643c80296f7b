import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { SqlExecutor } from '../db/types.js';
import type { OutboxRelay } from './OutboxRelay.js';

/** CloudWatch metric names the alarms of the pipeline stacks watch (namespace ReliableMessaging). */
export const OUTBOX_METRICS = {
  backlog: 'OutboxBacklog',
  oldestAge: 'OutboxOldestUnpublishedAgeSeconds',
  needsAttention: 'OutboxNeedsAttention',
  published: 'OutboxPublished',
  failed: 'OutboxPublishFailures',
} as const;

export const METRICS_NAMESPACE = 'ReliableMessaging';

/**
 * Publishes each outbox's backlog, oldest unpublished age and rows needing attention (one cheap
 * query on the partial indexes), plus what this invocation published and failed.
 */
export async function publishOutboxMetrics(
  db: SqlExecutor,
  relays: readonly OutboxRelay[],
  results: readonly { published: number; failed: number }[],
): Promise<void> {
  for (let i = 0; i < relays.length; i++) {
    const relay = relays[i] as OutboxRelay;
    const status = await relay.store.status(db, { includePublished: false });
    const m = new Metrics({
      namespace: METRICS_NAMESPACE,
      serviceName: 'outbox-relay',
      defaultDimensions: { Outbox: relay.store.table },
    });
    m.addMetric(OUTBOX_METRICS.backlog, MetricUnit.Count, status.backlog);
    m.addMetric(
      OUTBOX_METRICS.oldestAge,
      MetricUnit.Seconds,
      status.oldestUnpublishedAgeSeconds ?? 0,
    );
    m.addMetric(OUTBOX_METRICS.needsAttention, MetricUnit.Count, status.needsAttention);
    m.addMetric(OUTBOX_METRICS.published, MetricUnit.Count, results[i]?.published ?? 0);
    m.addMetric(OUTBOX_METRICS.failed, MetricUnit.Count, results[i]?.failed ?? 0);
    m.publishStoredMetrics();
  }
}
