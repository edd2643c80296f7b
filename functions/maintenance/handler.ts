import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { ScheduledEvent } from 'aws-lambda';
import type { Logger, Retention, RetryBudget, SqlExecutor } from '../../shared/index.js';
import {
  type MaintenanceResult,
  maintenanceTablesOf,
  runMaintenance,
} from '../../shared/maintenance/retention.js';
import { SERVICES, type Service } from '../../shared/pipeline/schema.js';

export interface MaintenanceHandlerDeps {
  /** Each service's database. */
  dbs: Readonly<Record<Service, SqlExecutor>>;
  logger: Logger;
  retention: Retention;
  budget: RetryBudget;
  /** Rows per DELETE statement (default 5000). */
  batchSize?: number;
}

/**
 * Retention maintenance for a daily EventBridge schedule: trims each service's inbox and published
 * outbox rows in its own database (see `shared/maintenance/retention.ts`), logs and returns the
 * counts per database and table.
 * A retention that would forget inbox rows while their messages can still come back is refused
 * before anything is deleted: the invocation fails (logged at error level) so it alarms.
 * A timeout halfway is harmless: each batch commits on its own; the rest goes the next day.
 */
export function createMaintenanceHandler(deps: MaintenanceHandlerDeps) {
  return middy<ScheduledEvent, Record<Service, MaintenanceResult>>()
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .handler(async () => {
      const started = Date.now();
      try {
        const out = {} as Record<Service, MaintenanceResult>;
        for (const service of SERVICES) {
          out[service] = await runMaintenance(deps.dbs[service], {
            retention: deps.retention,
            budget: deps.budget,
            batchSize: deps.batchSize,
            tables: maintenanceTablesOf(service),
          });
        }
        deps.logger.info('maintenance done', {
          durationMs: Date.now() - started,
          batchSize: out.orders.batchSize,
          databases: Object.fromEntries(SERVICES.map((s) => [s, out[s].tables])),
        });
        return out;
      } catch (err) {
        deps.logger.error('maintenance failed', err as Error);
        throw err;
      }
    });
}
