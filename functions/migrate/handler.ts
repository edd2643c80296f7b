import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { migrate } from '../../shared/db/migrate.js';
import type { SqlDatabase } from '../../shared/db/types.js';
import type { Logger } from '../../shared/logger.js';

export interface MigrateResponse {
  PhysicalResourceId: string;
  Data: { applied: number; skipped: number };
}

/**
 * Applies the migrations on deploy: the `onEvent` handler of a CloudFormation custom resource
 * (CDK Provider framework). Create and Update apply what is pending (a re-run is a no-op); Delete
 * keeps the data. Through the Data API each statement is its own call, in one transaction per
 * migration (note: Aurora commits DDL implicitly, so a failing migration may leave part of it).
 */
export function createMigrateHandler(deps: { db: SqlDatabase; logger: Logger }) {
  return middy<CloudFormationCustomResourceEvent, MigrateResponse>()
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .handler(async (event) => {
      if (event.RequestType === 'Delete') {
        return { PhysicalResourceId: event.PhysicalResourceId, Data: { applied: 0, skipped: 0 } };
      }
      const { applied, skipped } = await migrate(deps.db);
      deps.logger.info('migrations applied', { applied, skipped: skipped.length });
      return {
        PhysicalResourceId: 'schema-migrations',
        Data: { applied: applied.length, skipped: skipped.length },
      };
    });
}
