import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { METRICS_NAMESPACE } from '../config/constants.js';
import type { SqlExecutor } from '../db/types.js';
import type { Logger } from '../logger.js';
import type { DrainResult, OutboxRelay } from './OutboxRelay.js';

/** CloudWatch metric names the alarms of the pipeline stacks watch (namespace ReliableMessaging). */
export const OUTBOX_METRICS = {
  backlog: 'OutboxBacklog',
  oldestAge: 'OutboxOldestUnpublishedAgeSeconds',
  needsAttention: 'OutboxNeedsAttention',
  published: 'OutboxPublished',
  failed: 'OutboxPublishFailures',
  /** 1 per relay invocation and outbox, published even when every round failed (item: missing data is breaching). */
  heartbeat: 'RelayHeartbeat',
  /** Rounds that threw (database trouble, a bug): the relay logs and retries them, so Lambda's Errors stays 0. */
  roundErrors: 'RelayRoundErrors',
  /** Rows taken out of the batches this invocation because they cannot be published (they also count in needsAttention). */
  setAside: 'OutboxSetAside',
  /**
   * Published rows put back into the batches this invocation because a lost route may have
   * swallowed them (RabbitMQ, beside `RouteMissing`: docs/design.md §4, "Missing routes").
   */
  republished: 'OutboxRepublished',
} as const;

/** What one invocation did for one outbox (a `DrainResult`; missing counts are 0). */
export type InvocationCounts = Partial<
  Pick<DrainResult, 'published' | 'failed' | 'setAside' | 'roundErrors' | 'republished'>
>;

/**
 * Publishes, per outbox: the heartbeat (1) and what this invocation did (published, failed, set
 * aside, republished, round errors), always and first; then, when `db` is given (the invocation read the
 * outboxes: a scheduled tick that does not sweep leaves the database alone), the backlog, oldest
 * unpublished age and rows needing attention from one cheap query on the partial indexes, when
 * that query works. A failed query is logged and costs only those three gauges: the heartbeat and
 * the error counts are what the alarms need most when the database is in trouble.
 *
 * Returns the total backlog of the outboxes, or undefined when it is not known (no `db`, or a
 * query failed).
 */
export async function publishOutboxMetrics(
  db: SqlExecutor | undefined,
  relays: readonly OutboxRelay[],
  results: readonly InvocationCounts[],
  logger?: Logger,
): Promise<number | undefined> {
  let backlog: number | undefined = db ? 0 : undefined;
  for (let i = 0; i < relays.length; i++) {
    const relay = relays[i] as OutboxRelay;
    const counts = results[i] ?? {};
    const m = new Metrics({
      namespace: METRICS_NAMESPACE,
      serviceName: 'outbox-relay',
      defaultDimensions: { Outbox: relay.store.table },
    });
    m.addMetric(OUTBOX_METRICS.heartbeat, MetricUnit.Count, 1);
    m.addMetric(OUTBOX_METRICS.roundErrors, MetricUnit.Count, counts.roundErrors ?? 0);
    m.addMetric(OUTBOX_METRICS.setAside, MetricUnit.Count, counts.setAside ?? 0);
    m.addMetric(OUTBOX_METRICS.published, MetricUnit.Count, counts.published ?? 0);
    m.addMetric(OUTBOX_METRICS.failed, MetricUnit.Count, counts.failed ?? 0);
    m.addMetric(OUTBOX_METRICS.republished, MetricUnit.Count, counts.republished ?? 0);
    // Flushed before the query, so that a database that hangs or fails cannot hold them back.
    m.publishStoredMetrics();
    if (!db) continue;
    try {
      const status = await relay.store.status(db, { includePublished: false });
      if (backlog !== undefined) backlog += status.backlog;
      m.addMetric(OUTBOX_METRICS.backlog, MetricUnit.Count, status.backlog);
      m.addMetric(
        OUTBOX_METRICS.oldestAge,
        MetricUnit.Seconds,
        status.oldestUnpublishedAgeSeconds ?? 0,
      );
      m.addMetric(OUTBOX_METRICS.needsAttention, MetricUnit.Count, status.needsAttention);
      m.publishStoredMetrics();
    } catch (err) {
      backlog = undefined;
      logger?.warn('outbox status unavailable: publishing the heartbeat and counts only', {
        table: relay.store.table,
        error: (err as Error).message,
      });
    }
  }
  return backlog;
}
