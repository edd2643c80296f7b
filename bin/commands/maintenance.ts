import type { Command } from 'commander';
import { loadBudget } from '../../shared/config/budget.js';
import { ConfigError } from '../../shared/config/env.js';
import {
  DEFAULT_MAINTENANCE_BATCH_SIZE,
  loadRetention,
  type MaintenanceResult,
  maintenanceTablesOf,
  runMaintenance,
} from '../../shared/maintenance/retention.js';
import { SERVICES, type Service } from '../../shared/pipeline/schema.js';
import { withDb } from './common.js';
import { stackOption } from './stack.js';

export function registerMaintenanceCommands(program: Command): void {
  const maintenance = program.command('maintenance').description('retention maintenance');
  maintenance
    .command('run')
    .description(
      'delete inbox rows and published outbox rows older than their retention ' +
        '(INBOX_RETENTION_MS, PUBLISHED_OUTBOX_RETENTION_MS); unpublished rows are never deleted',
    )
    .option(
      '--batch-size <n>',
      `rows per DELETE statement (default ${DEFAULT_MAINTENANCE_BATCH_SIZE})`,
    )
    .option('--dry-run', 'count what would be deleted, delete nothing')
    .option('--json', 'print JSON')
    .addOption(stackOption())
    .action(
      async (opts: { batchSize?: string; dryRun?: boolean; json?: boolean; stack?: string }) => {
        const batchSize =
          opts.batchSize === undefined ? DEFAULT_MAINTENANCE_BATCH_SIZE : Number(opts.batchSize);
        if (!Number.isSafeInteger(batchSize) || batchSize < 1) {
          program.error(`--batch-size must be a positive integer, got '${opts.batchSize}'`);
        }
        const results = {} as Record<Service, MaintenanceResult>;
        try {
          const retention = loadRetention();
          const budget = loadBudget(process.env, undefined, retention);
          // each service's inbox and outbox, in its own database
          for (const service of SERVICES) {
            results[service] = await withDb(
              { stack: opts.stack, login: 'maintenance', service },
              (db) =>
                runMaintenance(db, {
                  retention,
                  budget,
                  batchSize,
                  dryRun: opts.dryRun === true,
                  tables: maintenanceTablesOf(service),
                }),
            );
          }
        } catch (err) {
          if (err instanceof ConfigError) program.error(`refused: ${err.message}`);
          throw err;
        }
        if (opts.json) {
          console.log(JSON.stringify(results, null, 2));
          return;
        }
        const dryRun = opts.dryRun === true;
        console.table(
          SERVICES.flatMap((service) =>
            Object.entries(results[service].tables).map(([table, r]) => ({
              database: service,
              table,
              [dryRun ? 'would delete' : 'deleted']: r.deleted,
              batches: r.batches,
              'older than': r.cutoff,
            })),
          ),
        );
        if (dryRun) console.log('dry run: nothing was deleted');
      },
    );
}
