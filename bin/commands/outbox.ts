import type { Command } from 'commander';
import { OutboxStore } from '../../shared/outbox/OutboxStore.js';
import { OUTBOX_TABLES } from '../../shared/pipeline/constants.js';
import { serviceOfOutbox } from '../../shared/pipeline/relays.js';
import { list, withDb } from './common.js';
import { stackOption } from './stack.js';

export function registerOutboxCommands(program: Command): void {
  const outbox = program.command('outbox').description('inspect and operate the outboxes');
  outbox
    .command('status')
    .description(
      'backlog, oldest unpublished age and rows needing attention (with their reason), per outbox',
    )
    .option('--json', 'print JSON')
    .option('--limit <n>', 'rows needing attention listed per outbox', '50')
    .addOption(stackOption())
    .action(async (opts: { json?: boolean; limit: string; stack?: string }) => {
      const limit = Number.parseInt(opts.limit, 10);
      if (!Number.isInteger(limit) || limit < 0) program.error('--limit must be a whole number');
      // each outbox in its service's database
      const statuses = [];
      for (const t of OUTBOX_TABLES) {
        statuses.push(
          await withDb(
            { stack: opts.stack, login: 'relay', service: serviceOfOutbox(t) },
            async (db) => {
              const store = new OutboxStore(t);
              const status = await store.status(db);
              return {
                ...status,
                rows: status.needsAttention > 0 ? await store.needsAttention(db, limit) : [],
              };
            },
          ),
        );
      }
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
            'of which set aside': s.setAside,
            published: s.published,
          })),
        );
        const rows = statuses.flatMap((s) => s.rows.map((r) => ({ outbox: s.table, ...r })));
        if (rows.length > 0) {
          console.table(
            rows.map((r) => ({
              outbox: r.outbox,
              id: r.id,
              type: r.type,
              schema: r.schemaVersion,
              since: r.needsAttentionAt,
              why: r.setAside ? 'set aside' : `${r.attempts} attempts`,
              reason: r.reason,
            })),
          );
        }
      }
      if (statuses.some((s) => s.needsAttention > 0)) {
        console.error(
          'rows need attention: fix the cause (for a set-aside row: the row itself, or deploy the code that reads it), then run `outbox retry`',
        );
        process.exitCode = 1;
      }
    });
  outbox
    .command('retry')
    .description(
      'put rows that need attention (out of attempts or set aside) back into the relay batches',
    )
    .option('--table <table>', `one of ${OUTBOX_TABLES.join(', ')} (default: both)`)
    .option('--ids <ids>', 'comma-separated event ids (default: all that need attention)')
    .addOption(stackOption())
    .action(async (opts: { table?: string; ids?: string; stack?: string }) => {
      const tables = opts.table
        ? OUTBOX_TABLES.filter((t) => t === opts.table)
        : [...OUTBOX_TABLES];
      if (tables.length === 0) program.error(`--table must be one of ${OUTBOX_TABLES.join(', ')}`);
      const ids = opts.ids === undefined ? undefined : list(opts.ids);
      for (const t of tables) {
        await withDb(
          { stack: opts.stack, login: 'relay', service: serviceOfOutbox(t) },
          async (db) => {
            const n = await new OutboxStore(t).retryNeedsAttention(db, ids);
            console.log(`${t}: ${n} row(s) back in the batches`);
          },
        );
      }
    });
}
