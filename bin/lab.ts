import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Command } from 'commander';
import { startMotoServer } from '../devkit/emulators/motoServer.js';
import { ensureServices } from '../devkit/preflight.js';
import {
  bundleSettings,
  LabAssemblies,
  notApplicableWithBundles,
  pipelineOverrides,
} from '../lab/bundles.js';
import {
  ALL_CONFIGURATION_IDS,
  PEER_CONFIGURATION_LIST,
  parseConfigurations,
} from '../lab/configurations.js';
import { brokerOf } from '../lab/report/cells.js';
import { renderHtml } from '../lab/report/html.js';
import { renderMarkdown } from '../lab/report/markdown.js';
import { versionsText } from '../lab/report/model.js';
import { renderTable } from '../lab/report/table.js';
import { describeSettings, runAll } from '../lab/runner.js';
import { notApplicableTo } from '../lab/scenario.js';
import { parseScenarios, SCENARIOS } from '../lab/scenarios/index.js';
import { startLabServices } from '../lab/services.js';
import { REAL_TIME_SETTINGS, SCALED_SETTINGS } from '../lab/settings.js';
import { REDIS_URL, redisProblem } from '../peers/redis.js';
import { loadEnv } from '../shared/config/env.js';

/**
 * `npm start`: the comparison lab. Runs the scenario catalogue on every transport
 * configuration, each run in its own database, virtual host and queues, prints the comparison
 * table and writes reports/compare.{json,md,html}. Exits 1 if any invariant failed.
 */
process.env.POWERTOOLS_LOG_LEVEL ??= 'SILENT';

const program = new Command('lab')
  .description('run the fault scenarios on every transport configuration side by side')
  .option('--scenario <ids>', `comma list of scenarios (${SCENARIOS.map((s) => s.id).join(', ')})`)
  .option('--config <ids>', `comma list of configurations (${ALL_CONFIGURATION_IDS.join(', ')})`)
  .option(
    '--peers',
    'add the peer configurations: the libraries a user would otherwise pick, through the same scenarios (needs Redis at REDIS_URL)',
  )
  .option('--real-time', 'use the production retry budget and timeouts (takes far longer)')
  .option('--out <dir>', 'where the reports go', 'reports')
  .option('--concurrency <n>', 'runs at once', (v) => Number.parseInt(v, 10))
  .option(
    '--bundles',
    'run the consumers and the relay from the deployed bundles (cdk synth, Lambda-shaped processes)',
  )
  .parse();

const opts = program.opts<{
  scenario?: string;
  config?: string;
  realTime?: boolean;
  out: string;
  concurrency?: number;
  bundles?: boolean;
  peers?: boolean;
}>();

const scenarios = parseScenarios(opts.scenario);
const configurations = parseConfigurations(opts.config);
if (opts.peers) {
  for (const c of PEER_CONFIGURATION_LIST) if (!configurations.includes(c)) configurations.push(c);
}
const withPeers = configurations.some((c) => c.peer);
if (withPeers && opts.bundles) {
  console.error(
    '--bundles runs our deployed bundles; the peers run from their packages: run them without --bundles',
  );
  process.exit(2);
}
const baseSettings = opts.realTime ? REAL_TIME_SETTINGS : SCALED_SETTINGS;
const settings = opts.bundles ? bundleSettings(baseSettings) : baseSettings;
const env = loadEnv();
// A local broker's management plugin that is off is turned on; PostgreSQL or RabbitMQ that does
// not answer is started in a container where an engine can (the same fallback as `npm test`).
const ensured = await ensureServices({
  databaseUrl: env.DATABASE_URL,
  amqpUrl: env.AMQP_URL,
  managementUrl: env.RABBITMQ_MANAGEMENT_URL,
});
if (withPeers) {
  const problem = await redisProblem(REDIS_URL);
  if (problem) ensured.problems.push(problem);
}
if (ensured.problems.length > 0) {
  for (const line of ensured.problems) console.error(line);
  await ensured.stop();
  process.exit(2);
}
// Containers started here are stopped on Ctrl-C too (without a reaper nothing else would).
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void ensured.stop().finally(() => process.exit(130));
  });
}
env.DATABASE_URL = ensured.databaseUrl;
env.AMQP_URL = ensured.amqpUrl;
env.RABBITMQ_MANAGEMENT_URL = ensured.managementUrl;

const services = await startLabServices(env).catch(async (err) => {
  await ensured.stop();
  throw err;
});
if (opts.bundles) {
  // the bundles read their secrets from Secrets Manager: moto's, shared by every run
  const moto = await startMotoServer().catch(async (err: unknown) => {
    await services.stop();
    await ensured.stop();
    console.error(`--bundles needs moto_server for Secrets Manager: ${(err as Error).message}`);
    process.exit(2);
  });
  const stopServices = services.stop;
  services.stop = async () => {
    await moto.stop();
    await stopServices();
  };
  services.secretsEndpoint = moto.endpoint;
  services.assemblies = new LabAssemblies((line) => console.log(`  ${line}`));
  // every variant the runs need, synthesized (or found cached) before any run starts
  const started = Date.now();
  for (const c of configurations) {
    for (const s of scenarios) {
      if (notApplicableTo(s, c) || notApplicableWithBundles(s, c)) continue;
      const budget = { ...settings.budget, ...s.rig?.budget };
      await services.assemblies.get(c.transport, pipelineOverrides(settings, c, budget));
    }
  }
  const made = services.assemblies.synthesized;
  console.log(
    `bundles: ${made.length ? `${made.length} assemblies synthesized in ${((Date.now() - started) / 1000).toFixed(0)} s` : 'every assembly cached'}`,
  );
}
const total = scenarios.length * configurations.length;
const tty = process.stdout.isTTY;
console.log(
  `comparison lab: ${scenarios.length} scenarios × ${configurations.length} configurations (${total} runs)`,
);
console.log(`  ${describeSettings(settings)}`);
console.log(
  `  RabbitMQ ${services.versions.rabbitmq} at ${new URL(services.amqpUrl).host}, PostgreSQL ${services.versions.postgresql}`,
);
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
  await ensured.stop();
}
report.versions = services.versions;
// the cost table beside the behaviour table, from the last cost benchmark (when there is one)
try {
  const bench = JSON.parse(await readFile(resolve('reports/bench.json'), 'utf8')) as {
    cost?: {
      measuredAt?: string;
      configurations: NonNullable<typeof report.cost>['configurations'];
    };
  };
  if (bench.cost?.configurations?.length) {
    report.cost = {
      measuredAt: bench.cost.measuredAt ?? 'date not recorded',
      configurations: bench.cost.configurations,
    };
  }
} catch {
  // no cost benchmark run yet
}
for (const s of report.scenarios) {
  for (const r of s.results) {
    const broker = brokerOf(r.configuration, services.versions);
    if (broker) r.broker = broker;
  }
}

console.log(`\n${renderTable(report)}\n`);
const out = resolve(opts.out);
await mkdir(out, { recursive: true });
await writeFile(join(out, 'compare.json'), `${JSON.stringify(report, null, 2)}\n`);
await writeFile(join(out, 'compare.md'), renderMarkdown(report));
await writeFile(join(out, 'compare.html'), renderHtml(report));
if (report.peers) {
  console.log('peers (a failed invariant is a finding about the peer, not a failure of the lab):');
  for (const p of report.peers) {
    console.log(`  ${p.id}: ${p.held} of ${p.ran} invariants held (${versionsText(p.versions)})`);
  }
}
console.log(
  `${report.allHeld ? `all invariants held${report.peers ? ' on our configurations' : ''}` : 'SOME INVARIANTS FAILED'} in ${(report.durationMs / 1000).toFixed(0)} s; reports in ${out}/compare.{json,md,html}`,
);
process.exit(report.allHeld ? 0 : 1);
