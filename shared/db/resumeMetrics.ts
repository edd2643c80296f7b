import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Logger } from '../logger.js';
import type { ResumeEvent } from './data-api/DataApiDatabase.js';

/** CloudWatch metric names of the resume wait (namespace ReliableMessaging, dimension `service`). */
export const DATABASE_RESUME_METRICS = {
  /**
   * Calls that met a resuming cluster (a pause is routine at rest): no alarm watches it. A wait
   * that ran out shows as the caller's own failure (its alarm), with this count beside it.
   */
  resumes: 'DatabaseResumes',
  /** How long such a call waited (ms). */
  waitMs: 'DatabaseResumeWaitMs',
} as const;

const NAMESPACE = 'ReliableMessaging';

/**
 * The `onResume` of a function's Data API adapter: one EMF record per call that met a resume
 * (`DatabaseResumes` 1, `DatabaseResumeWaitMs`), with the function as its `service` dimension,
 * and one log line (info when it went through, warn when the wait ran out).
 */
export function databaseResumeReporter(
  service: string,
  logger?: Logger,
): (event: ResumeEvent) => void {
  return (event) => {
    try {
      const m = new Metrics({ namespace: NAMESPACE, serviceName: service });
      m.addMetric(DATABASE_RESUME_METRICS.resumes, MetricUnit.Count, 1);
      m.addMetric(DATABASE_RESUME_METRICS.waitMs, MetricUnit.Milliseconds, event.waitedMs);
      m.publishStoredMetrics();
    } catch {
      // metrics are best effort: the call's own outcome is what matters
    }
    const line = { ...event };
    if (event.resumed) logger?.info('database resumed from a pause: the call went through', line);
    else logger?.warn('database still resuming: the wait ran out of budget', line);
  };
}
