import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { Command } from 'commander';
import { parseOptions } from '../bench/options.js';
import { requireServices } from '../devkit/preflight.js';
import { localTransport } from '../devkit/transports/index.js';
import { loadEnv } from '../shared/config/env.js';
import { type RabbitConsumer, runSoak, type SoakReport, type SoakTransportName } from './soak.js';
import { summary } from './summary.js';

/**
 * `npm run soak`: the chaos soak. Per transport: orders placed through the HTTP API
 * while a controller SIGKILLs and restarts the relay, the consumer and the API, takes the broker
 * down and terminates the database connections (with `--db data-api`, also pauses the cluster
 * behind the roles' Data API endpoint); then faults stop, the pipeline drains, and the
 * end state is checked (see soak/verify.ts). Prints the counts, writes reports/soak.json, exits 1
 * on any violation. Not part of `npm test` (test/integration/soak.smoke.test.ts runs a tiny one).
 */
const program = new Command('soak');
const opts = parseOptions(program, [
  [
    '--transport <transports>',
    'rabbitmq (worker), rabbitmq-amazonmq (the reserve function behind the Amazon MQ trigger emulation, its database sessions terminated mid-batch), sqs; comma-separated',
    'rabbitmq,rabbitmq-amazonmq,sqs',
  ],
  ['--orders <n>', 'orders per transport', '10000'],
  ['--poison <n>', 'poison events among them (default: 0.2 % of the orders, at least 2)'],
  ['--duration <seconds>', 'fault phase (at least; it lasts until every order is placed)', '120'],
  ['--seed <n>', 'seed for the orders and the fault schedule (default: random, printed)'],
  [
    '--broker-fault <how>',
    'RabbitMQ outage: restart the broker (rabbitmqctl stop_app/start_app: every client of the broker sees it) or cut a TCP proxy in front of it',
    'restart',
    ['restart', 'proxy'],
  ],
  ['--broker-outages <n>', 'broker outages per transport, evenly spread over the fault phase', '3'],
  ['--bad-rows <n>', 'outbox rows the relay cannot publish, among the orders', '3'],
  ['--fault-gap <ms>', 'pause between two faults, min-max', '1500-4000'],
  [
    '--db <adapter>',
    "the roles' database: node-postgres, or the RDS Data API through one endpoint the soak hosts, whose cluster pauses (db-pause) while orders flow and in a quiet spell",
    'pg',
    ['pg', 'data-api'],
  ],
  ['--db-pauses <n>', 'with --db data-api: pauses while orders flow', '2'],
  ['--resume-ms <ms>', 'with --db data-api: how long a resume takes', '15000'],
  ['--drain-timeout <seconds>', 'how long the pipeline may take to drain after the faults', '300'],
  ['--clients <n>', 'concurrent HTTP clients', '8'],
  ['--out <path>', 'report file', 'reports/soak.json'],
  ['--log-dir <path>', 'child process logs', 'reports/soak-logs'],
  ['--keep', 'keep the databases and virtual hosts'],
]);

const RUNS: Record<string, { transport: SoakTransportName; consumer?: RabbitConsumer }> = {
  rabbitmq: { transport: 'rabbitmq' },
  'rabbitmq-amazonmq': { transport: 'rabbitmq', consumer: 'amazonmq' },
  sqs: { transport: 'sqs' },
};
const runs = opts.transport.split(',').map((t) => {
  const run = RUNS[t.trim()];
  return run ?? program.error(`unknown transport "${t}"`);
});
const transports = runs.map((r) => r.transport);
const orders = Number(opts.orders);
const [gapMin, gapMax] = opts.faultGap.split('-').map(Number);
if (!gapMin || !gapMax || gapMin > gapMax) program.error('--fault-gap must look like 1500-4000');
const seed = opts.seed ? Number(opts.seed) : Math.floor(Math.random() * 2 ** 31);
const env = loadEnv();
await requireServices(
  Object.assign(
    { postgres: env.DATABASE_URL },
    ...transports.map((t) => localTransport(t).required(env, 'consume')),
  ),
);

const progress = (line: string) =>
  process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
progress(`soak: seed ${seed} (repeat with --seed ${seed})`);
const reports: SoakReport[] = [];
for (const { transport, consumer } of runs) {
  const report = await runSoak({
    transport,
    ...(consumer ? { consumer } : {}),
    orders,
    poison: opts.poison !== undefined ? Number(opts.poison) : Math.max(2, Math.round(orders / 500)),
    durationMs: Number(opts.duration) * 1000,
    seed,
    brokerFault: opts.brokerFault,
    brokerOutages: Number(opts.brokerOutages),
    badRows: Number(opts.badRows),
    faultGapMs: [gapMin as number, gapMax as number],
    db: opts.db,
    dbPauses: Number(opts.dbPauses),
    resumeMs: Number(opts.resumeMs),
    drainTimeoutMs: Number(opts.drainTimeout) * 1000,
    clients: Number(opts.clients),
    services: {
      databaseUrl: env.DATABASE_URL,
      amqpUrl: env.AMQP_URL,
      managementUrl: env.RABBITMQ_MANAGEMENT_URL,
    },
    logDir: opts.logDir,
    keep: opts.keep ?? false,
    progress,
  });
  reports.push(report);
  console.log(summary(report));
}

mkdirSync(dirname(opts.out), { recursive: true });
writeFileSync(
  opts.out,
  `${JSON.stringify({ seed, generatedAt: new Date().toISOString(), runs: reports }, null, 2)}\n`,
);
console.log(`report: ${opts.out}`);
const failed = reports.filter((r) => !r.ok);
if (failed.length > 0) {
  console.log(`SOAK FAILED on ${failed.map((r) => r.transport).join(', ')}`);
  process.exit(1);
}
console.log('soak passed: every invariant held on every transport');
process.exit(0);
