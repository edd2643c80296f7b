#!/usr/bin/env node
import { Command, InvalidArgumentError, Option } from 'commander';
import { TRANSPORT_NAMES } from '../../transport/index.js';
import { conformanceServicesFromEnv } from './index.js';
import { renderText } from './report.js';
import { runConformance } from './runner.js';
import { SCENARIO_NAMES, type ScenarioName } from './types.js';

/**
 * `reliable-messaging-serverless conformance --handler <module> --transport <name>`: runs the
 * conformance scenarios against the user's handler on the services of the environment, prints the
 * report, writes it under `--out`, and exits 0 when every applicable scenario passed, 1 otherwise.
 */
const whole = (what: string, min: number) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) {
    throw new InvalidArgumentError(`${what} must be a whole number ≥ ${min}`);
  }
  return n;
};

const scenarioList = (value: string): ScenarioName[] => {
  const names = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = names.filter((n) => !(SCENARIO_NAMES as readonly string[]).includes(n));
  if (unknown.length > 0 || names.length === 0) {
    throw new InvalidArgumentError(
      `${unknown.join(', ') || '(none)'}: scenarios are ${SCENARIO_NAMES.join(', ')}`,
    );
  }
  return names as ScenarioName[];
};

/** Exits once what was written is flushed (a client left open must not hold the process). */
const exit = (code: number) => process.stdout.write('', () => process.exit(code));

const program = new Command('reliable-messaging-serverless');

program
  .command('conformance')
  .description(
    'run the conformance scenarios against your handler (services from DATABASE_URL, AMQP_URL, RABBITMQ_MANAGEMENT_URL, SQS_ENDPOINT, NATS_URL)',
  )
  .requiredOption(
    '--handler <module>',
    'the subject module: it exports a ConformanceSubject as `default` or `conformance`',
  )
  .addOption(
    new Option('--transport <name>', 'the transport to run on')
      .choices(TRANSPORT_NAMES)
      .makeOptionMandatory(),
  )
  .option(
    '--scenario <names>',
    `comma-separated, default all: ${SCENARIO_NAMES.join(', ')}`,
    scenarioList,
  )
  .option('--events <n>', 'good events per scenario', whole('--events', 2), 8)
  .option('--out <dir>', 'write conformance.json and conformance.md there')
  .option(
    '--timeout <seconds>',
    'how long a scenario may wait for its messages',
    whole('--timeout', 1),
    60,
  )
  .option('--concurrency <n>', 'scenarios at once', whole('--concurrency', 1), 3)
  .action(
    async (o: {
      handler: string;
      transport: string;
      scenario?: ScenarioName[];
      events: number;
      out?: string;
      timeout: number;
      concurrency: number;
    }) => {
      const report = await runConformance({
        subject: o.handler,
        transport: o.transport,
        services: conformanceServicesFromEnv(),
        scenarios: o.scenario,
        events: o.events,
        out: o.out,
        timeoutMs: o.timeout * 1_000,
        concurrency: o.concurrency,
        onResult: (r) =>
          process.stdout.write(
            `${r.scenario}: ${r.status}${r.status === 'n/a' ? '' : ` (${(r.durationMs / 1000).toFixed(1)} s)`}\n`,
          ),
      });
      process.stdout.write(`\n${renderText(report)}`);
      if (o.out) process.stdout.write(`\nreport: ${o.out}/conformance.json, conformance.md\n`);
      exit(report.passed ? 0 : 1);
    },
  );

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`conformance: ${err instanceof Error ? err.message : String(err)}\n`);
  process.stderr.write('', () => process.exit(1));
});
