import { mkdir, writeFile } from 'node:fs/promises';
import { type Command, Option } from 'commander';
import { requireServices } from '../../devkit/preflight.js';
import { localTransport, SHARED_TRANSPORTS } from '../../devkit/transports/index.js';
import { loadBudget } from '../../shared/config/budget.js';
import { reservationQuarantineNotice } from '../../shared/inventory/quarantine.js';
import { loadRetention } from '../../shared/maintenance/retention.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { CODE_VERSION } from '../../shared/pipeline/version.js';
import type { Backend, Diagnosis, ParkingLot, RedriveSelection } from '../../shared/port/types.js';
import {
  backendFromConfig,
  backendFromEnv,
  type TransportName,
} from '../../shared/transport/index.js';
import { env, list } from './common.js';
import { describeStack, stackOption } from './stack.js';

const transportOption = () =>
  new Option('--transport <transport>', 'which parking lot')
    .choices(SHARED_TRANSPORTS)
    .makeOptionMandatory();

/**
 * Runs `fn` with the parking lot of the chosen transport; exits 2 if it cannot be reached. With
 * `--stack`, SQS is the stack's region's (the queues by their pinned names, with the operator's
 * credentials); RabbitMQ is reached as without it, from inside the stack's VPC.
 */
async function withParkingLot<T>(
  transport: string,
  stack: string | undefined,
  fn: (lot: ParkingLot, backend: Backend) => Promise<T>,
): Promise<T> {
  const local = localTransport(transport);
  const deployed = stack ? await describeStack(stack) : undefined;
  const access = deployed && local.deployed?.operator(deployed, env);
  if (access && 'note' in access) console.error(access.note);
  const onStack = access && 'config' in access ? access : undefined;
  if (!onStack) await requireServices(local.required(env, 'publish'));
  const retention = loadRetention();
  const base = {
    budget: loadBudget(process.env, undefined, retention),
    retention,
    consumer: `cli@${CODE_VERSION}`,
    topology: PIPELINE_TOPOLOGY,
  };
  const backend = onStack
    ? backendFromConfig(transport, { ...base, ...onStack.config })
    : backendFromEnv(transport as TransportName, env, {
        ...base,
        connectionName: 'cli-parked',
        endpoint: env.SQS_ENDPOINT ?? `http://127.0.0.1:${env.SQS_LOCAL_PORT}`,
        maxAttempts: 1,
      });
  try {
    await backend.ready(5_000).catch((err: unknown) => {
      console.error(
        `${transport}: the parking lot is not reachable (${(err as Error).message}); ${
          onStack && deployed
            ? local.deployed?.unreachable(deployed.name)
            : `start the local pipeline with \`npm run dev -- --transport ${transport}\``
        }`,
      );
      process.exit(2);
    });
    return await fn(backend.parkingLot(), backend);
  } finally {
    await backend.close();
    onStack?.close();
  }
}

/** "2026-11-29T10:00:00Z", or a duration back from now: "15m", "2h", "3d". */
export function parseWhen(value: string): Date {
  const rel = /^(\d+)([smhd])$/.exec(value);
  if (rel) {
    const unit = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[
      rel[2] as 's' | 'm' | 'h' | 'd'
    ];
    return new Date(Date.now() - Number(rel[1]) * unit);
  }
  const t = Date.parse(value);
  if (Number.isNaN(t)) throw new Error(`not a time: "${value}" (use ISO-8601 or 15m / 2h / 3d)`);
  return new Date(t);
}

/** Where a parked message came from, in one cell: `orders/order.created → inventory.orders`. */
export function originText(o: Diagnosis['origin']): string {
  const route = [o.exchange, o.routingKey].filter(Boolean).join('/');
  return [route, o.queue].filter(Boolean).join(' → ') || '?';
}

export function registerParkedCommands(program: Command): void {
  const parked = program.command('parked').description('inspect and redrive parked messages');
  parked
    .command('list')
    .description('show parked messages with their diagnosis (they stay parked)')
    .addOption(transportOption())
    .addOption(stackOption())
    .option('--limit <n>', 'at most this many', '50')
    .option('--json', 'print JSON')
    .action(async (opts: { transport: string; stack?: string; limit: string; json?: boolean }) => {
      const items = await withParkingLot(opts.transport, opts.stack, (lot) =>
        lot.list(Number(opts.limit)),
      );
      if (opts.json) {
        const rows = items.map((p) => ({ via: p.via, ...p.diagnosis }));
        console.log(JSON.stringify(rows, null, 2));
        return;
      }
      if (items.length === 0) {
        console.log('the parking lot is empty');
        return;
      }
      console.table(
        items.map(({ diagnosis: d, via }) => ({
          'message id': d.messageId ?? '(none)',
          type: d.type ?? '?',
          schema: d.schemaVersion ?? '?',
          reason: d.reason,
          class: d.errorClass,
          attempts: d.attempts,
          'first failure': d.firstFailureAt,
          parked: d.parkedAt,
          by: via === 'broker' ? 'broker' : d.consumer,
          error: d.error.slice(0, 60),
          origin: originText(d.origin),
          producer: d.producer ?? '?',
          correlation: d.correlationId ?? '?',
          trace: d.traceId ?? '?',
        })),
      );
    });
  parked
    .command('notify')
    .description(
      'tell the order side about parked order events (inventory.reservation_quarantined), without consuming them: for messages the broker parked by itself',
    )
    .addOption(transportOption())
    .addOption(stackOption())
    .option('--limit <n>', 'read at most this many parked messages', '1000')
    .option('--dry-run', 'show the notices, publish nothing')
    .action(
      async (opts: { transport: string; stack?: string; limit: string; dryRun?: boolean }) => {
        const limit = Number(opts.limit);
        if (!(limit > 0)) program.error('--limit must be a positive number');
        const told = await withParkingLot(opts.transport, opts.stack, async (lot, backend) => {
          if (!backend.capabilities.brokerParking) return undefined;
          const items = await lot.list(limit);
          const notices = items.flatMap((p) => {
            const n = p.body ? reservationQuarantineNotice(p.body, p.diagnosis, p.via) : undefined;
            return n ? [n] : [];
          });
          if (opts.dryRun || notices.length === 0) return { notices, failed: 0 };
          // the results destination, as the relay publishes inventory_outbox (confirmed)
          const outcomes = await backend.publisher('inventory_outbox').publish(notices);
          for (const [i, o] of outcomes.entries()) {
            if (!o.ok) console.error(`not published ${notices[i]?.id}: ${o.reason}: ${o.error}`);
          }
          return { notices, failed: outcomes.filter((o) => !o.ok).length };
        });
        if (!told) {
          console.log(
            `${opts.transport} never parks a message by itself, and the consumer announced each message it parked before settling it: nothing to notify`,
          );
          return;
        }
        const { notices, failed } = told;
        for (const n of notices) {
          console.log(
            `${opts.dryRun ? 'would notify' : 'notified'} order ${n.aggregate.id} (v${n.aggregate.version}): ${n.id}`,
          );
        }
        console.log(
          `${opts.dryRun ? 'dry run: ' : ''}${notices.length} order(s) to tell, ${failed} not published; the same parked message always gives the same notice id: running again is safe`,
        );
        if (failed > 0) process.exitCode = 1;
      },
    );
  parked
    .command('redrive')
    .description(
      'move selected parked messages back to the consumer queue (same id, attempts reset)',
    )
    .addOption(transportOption())
    .addOption(stackOption())
    .option('--type <types>', 'event types, comma-separated')
    .option('--error-class <classes>', 'error classes or park reasons, comma-separated')
    .option('--since <when>', 'parked at or after (ISO-8601, or 15m / 2h / 3d ago)')
    .option('--until <when>', 'parked at or before')
    .option('--ids <ids>', 'message ids, comma-separated')
    .option('--rate <n>', 'messages per second at most', '10')
    .option('--dry-run', 'show what would move, move nothing')
    .option(
      '--beyond-limit',
      'redrive messages already redriven REDRIVE_LIMIT times too (their effect may apply twice)',
    )
    .option('--out <file>', 'where to save the moved ids (default reports/redrive-<time>.json)')
    .option(
      '--timeout <seconds>',
      'how long to wait for an SQS move task (redrive everything) to finish',
      '900',
    )
    .action(
      async (opts: {
        transport: string;
        stack?: string;
        type?: string;
        errorClass?: string;
        since?: string;
        until?: string;
        ids?: string;
        rate: string;
        dryRun?: boolean;
        beyondLimit?: boolean;
        out?: string;
        timeout: string;
      }) => {
        let selection: RedriveSelection;
        try {
          selection = {
            ...(opts.type ? { types: list(opts.type) } : {}),
            ...(opts.errorClass ? { errorClasses: list(opts.errorClass) } : {}),
            ...(opts.since ? { since: parseWhen(opts.since) } : {}),
            ...(opts.until ? { until: parseWhen(opts.until) } : {}),
            ...(opts.ids ? { ids: list(opts.ids) } : {}),
          };
        } catch (err) {
          program.error((err as Error).message);
        }
        const rate = Number(opts.rate);
        if (!(rate > 0)) program.error('--rate must be a positive number');
        const timeoutS = Number(opts.timeout);
        if (!(timeoutS > 0)) program.error('--timeout must be a positive number of seconds');
        if (opts.beyondLimit) {
          console.error(
            `--beyond-limit: messages already redriven REDRIVE_LIMIT (${loadRetention().redriveLimit}) times are redriven too. ` +
              'The inbox retention (INBOX_RETENTION_MS) covers only that many redrives: such a message may ' +
              'arrive after its inbox row was deleted and apply its effect a second time.',
          );
        }
        const result = await withParkingLot(opts.transport, opts.stack, (lot) =>
          lot.redrive(selection, {
            rate,
            dryRun: opts.dryRun ?? false,
            beyondLimit: opts.beyondLimit ?? false,
            onMoved: (id) => console.log(`moved ${id}`),
            timeoutMs: timeoutS * 1_000,
          }),
        );
        const { task } = result;
        if (task) {
          // A move task moved them (SQS, everything selected): done only once it completed.
          const counts = `moved ${task.moved}${task.toMove === undefined ? '' : ` of ${task.toMove}`}`;
          if (task.status === 'COMPLETED') {
            console.log(`move task ${task.handle} completed: ${counts}`);
            return;
          }
          console.error(
            task.status === 'RUNNING'
              ? `move task ${task.handle} still running after ${timeoutS} s (${counts}); it goes on: check again with ListMessageMoveTasks`
              : `move task ${task.handle} ${task.status.toLowerCase()}: ${counts}${task.failureReason ? ` (${task.failureReason})` : ''}`,
          );
          process.exitCode = 1;
          return;
        }
        console.log(
          `${result.dryRun ? 'dry run: ' : ''}scanned ${result.scanned}, matched ${result.matched}, moved ${result.moved.length}, skipped ${result.skipped.length}`,
        );
        for (const s of result.skipped) {
          console.error(
            `skipped ${s.messageId} (redriven ${s.redriveCount}×, still parked): ${s.reason}`,
          );
        }
        // Something matched stayed behind: the operator must look (raise the limit, or --beyond-limit).
        if (result.skipped.length > 0) process.exitCode = 1;
        if (!result.dryRun && (result.moved.length > 0 || result.skipped.length > 0)) {
          const out =
            opts.out ?? `reports/redrive-${new Date().toISOString().replace(/[:.]/g, '-')}.json`;
          await mkdir(out.split('/').slice(0, -1).join('/') || '.', { recursive: true });
          await writeFile(
            out,
            `${JSON.stringify({ at: new Date().toISOString(), selection: opts, moved: result.moved, skipped: result.skipped }, null, 2)}\n`,
          );
          console.log(`moved ids saved to ${out}`);
        }
      },
    );
}
