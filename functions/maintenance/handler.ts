import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { ScheduledEvent } from 'aws-lambda';
import type { Retention, RetryBudget } from '../../shared/config/budget.js';
import type { SqlExecutor } from '../../shared/db/types.js';
import type { Logger } from '../../shared/logger.js';
import { type MaintenanceResult, runMaintenance } from '../../shared/maintenance/retention.js';

export interface MaintenanceHandlerDeps {
  db: SqlExecutor;
  logger: Logger;
  retention: Retention;
  budget: RetryBudget;
  /** Rows per DELETE statement (default 5000). */
  batchSize?: number;
}

/**
 * Retention maintenance for a daily EventBridge schedule: trims the inbox and the published
 * outbox rows (see `shared/maintenance/retention.ts`), logs and returns the counts per table.
 * A retention that would forget inbox rows while their messages can still come back is refused
 * before anything is deleted: the invocation fails (logged at error level) so it alarms.
 * A timeout halfway is harmless: each batch commits on its own; the rest goes the next day.
 */
export function createMaintenanceHandler(deps: MaintenanceHandlerDeps) {
  return middy<ScheduledEvent, MaintenanceResult>()
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .handler(async () => {
      const started = Date.now();
      try {
        const result = await runMaintenance(deps.db, {
          retention: deps.retention,
          budget: deps.budget,
          batchSize: deps.batchSize,
        });
        deps.logger.info('maintenance done', {
          durationMs: Date.now() - started,
          batchSize: result.batchSize,
          tables: result.tables,
        });
        return result;
      } catch (err) {
        deps.logger.error('maintenance failed', err as Error);
        throw err;
      }
    });
}
