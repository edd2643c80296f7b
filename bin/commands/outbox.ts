import type { Command } from 'commander';
import { OUTBOX_TABLES } from '../../shared/config/constants.js';
import { OutboxStore } from '../../shared/outbox/OutboxStore.js';
import { withDb } from './common.js';

export function registerOutboxCommands(program: Command): void {
  const outbox = program.command('outbox').description('inspect and operate the outboxes');
  outbox
    .command('status')
    .description('backlog, oldest unpublished age and rows needing attention, per outbox')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const statuses = await withDb((db) =>
        Promise.all(OUTBOX_TABLES.map((t) => new OutboxStore(t).status(db))),
      );
      if (opts.json) {
        console.log(JSON.stringify(statuses, null, 2));
      } else {
        console.table(
          statuses.map((s) => ({
            outbox: s.table,
            backlog: s.backlog,
            retrying: s.retrying,
            'oldest unpublished (s)': s.oldestUnpublishedAgeSeconds ?? '-',
            'needs attention': s.needsAttention,
            published: s.published,
          })),
        );
      }
      if (statuses.some((s) => s.needsAttention > 0)) {
        console.error(
          'rows need attention: see last_error in the table; after fixing the cause run `outbox retry`',
        );
        process.exitCode = 1;
      }
    });
  outbox
    .command('retry')
    .description('put rows that need attention back into the relay batches')
    .option('--table <table>', `one of ${OUTBOX_TABLES.join(', ')} (default: both)`)
    .option('--ids <ids>', 'comma-separated event ids (default: all that need attention)')
    .action(async (opts: { table?: string; ids?: string }) => {
      const tables = opts.table
        ? OUTBOX_TABLES.filter((t) => t === opts.table)
        : [...OUTBOX_TABLES];
      if (tables.length === 0) program.error(`--table must be one of ${OUTBOX_TABLES.join(', ')}`);
      const ids = opts.ids
        ?.split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      await withDb(async (db) => {
        for (const t of tables) {
          const n = await new OutboxStore(t).retryNeedsAttention(db, ids);
          console.log(`${t}: ${n} row(s) back in the batches`);
        }
      });
    });
}
