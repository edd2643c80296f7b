import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Command } from 'commander';
import { requireServices } from '../devkit/preflight.js';
import { CONFIGURATION_IDS, parseConfigurations } from '../lab/configurations.js';
import { renderHtml } from '../lab/report/html.js';
import { renderMarkdown } from '../lab/report/markdown.js';
import { renderTable } from '../lab/report/table.js';
import { describeSettings, runAll } from '../lab/runner.js';
import { parseScenarios, SCENARIOS } from '../lab/scenarios/index.js';
import { startLabServices } from '../lab/services.js';
import { REAL_TIME_SETTINGS, SCALED_SETTINGS } from '../lab/settings.js';
import { loadEnv } from '../shared/config/env.js';

/**
 * `npm start`: the comparison lab. Runs the scenario catalogue on every transport
 * configuration, each run in its own database, virtual host and queues, prints the comparison
 * table and writes reports/compare.{json,md,html}. Exits 1 if any invariant failed.
 */
process.env.POWERTOOLS_LOG_LEVEL ??= 'SILENT';

const program = new Command('lab')
  .description('run the fault scenarios on RabbitMQ and SQS side by side')
  .option('--scenario <ids>', `comma list of scenarios (${SCENARIOS.map((s) => s.id).join(', ')})`)
  .option('--config <ids>', `comma list of configurations (${CONFIGURATION_IDS.join(', ')})`)
  .option('--real-time', 'use the production retry budget and timeouts (takes far longer)')
  .option('--out <dir>', 'where the reports go', 'reports')
  .option('--concurrency <n>', 'runs at once', (v) => Number.parseInt(v, 10))
  .parse();

const opts = program.opts<{
  scenario?: string;
  config?: string;
  realTime?: boolean;
  out: string;
  concurrency?: number;
}>();

const scenarios = parseScenarios(opts.scenario);
const configurations = parseConfigurations(opts.config);
const settings = opts.realTime ? REAL_TIME_SETTINGS : SCALED_SETTINGS;
const env = loadEnv();
await requireServices({
  postgres: env.DATABASE_URL,
  rabbitmq: env.AMQP_URL,
  rabbitManagement: env.RABBITMQ_MANAGEMENT_URL,
});

const services = await startLabServices(env);
const total = scenarios.length * configurations.length;
const tty = process.stdout.isTTY;
console.log(
  `comparison lab: ${scenarios.length} scenarios × ${configurations.length} configurations (${total} runs)`,
);
console.log(`  ${describeSettings(settings)}`);
console.log(`  SQS: ${services.sqsName} at ${services.sqsEndpoint}\n`);
let report: Awaited<ReturnType<typeof runAll>>;
try {
  report = await runAll({
    scenarios,
    configurations,
    settings,
    services,
    ...(opts.concurrency ? { concurrency: opts.concurrency } : {}),
    onResult(scenario, r, done, n) {
      const mark = !r.applicable ? '·' : r.invariantHeld ? '✓' : '✗';
      const time = r.applicable ? ` ${(r.wallMs / 1000).toFixed(1)} s` : ' not applicable';
      const line = `[${String(done).padStart(String(n).length)}/${n}] ${mark} ${scenario.id} × ${r.configuration}${time}`;
      console.log(tty && !r.invariantHeld ? `\x1b[31m${line}\x1b[0m` : line);
    },
  });
} finally {
  await services.stop();
}
report.versions = services.versions;

console.log(`\n${renderTable(report)}\n`);
const out = resolve(opts.out);
await mkdir(out, { recursive: true });
await writeFile(join(out, 'compare.json'), `${JSON.stringify(report, null, 2)}\n`);
await writeFile(join(out, 'compare.md'), renderMarkdown(report));
await writeFile(join(out, 'compare.html'), renderHtml(report));
console.log(
  `${report.allHeld ? 'all invariants held' : 'SOME INVARIANTS FAILED'} in ${(report.durationMs / 1000).toFixed(0)} s; reports in ${out}/compare.{json,md,html}`,
);
process.exit(report.allHeld ? 0 : 1);
