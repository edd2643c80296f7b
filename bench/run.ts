import { Command } from 'commander';
import { loadEnv } from '../shared/config/env.js';
import { requireServices } from '../shared/local/preflight.js';
import { benchRelayRabbit } from './relay.js';
import { type BenchFigure, DEFAULT_REPORT, progress, writeFigures } from './report.js';
import { benchReserveRabbit } from './reserve.js';
import { benchSqs } from './sqs.js';

/**
 * `npm run bench [-- <suite…>]`: benchmarks, each beside its raw baseline measured in the same run.
 * Suites: relay. Results are merged into reports/bench.json.
 */
const program = new Command('bench')
  .argument('[suites...]', 'suites to run (default: all)', [])
  .option('--messages <n>', 'messages per run', '20000')
  .option('--runs <n>', 'runs per figure (the median is reported)', '3')
  .option('--batch-size <n>', 'relay rows per round', '500')
  .option('--concurrency <n>', 'relay loops in the process', '2')
  .option('--window <n>', 'confirms outstanding per channel', '1000')
  .option('--consumers <n>', 'reserve: consumers (and raw connections)', '2')
  .option('--prefetch <n>', 'reserve: prefetch per consumer', '16')
  .option('--skus <n>', 'reserve: distinct SKUs (fewer = hotter rows)', '1000')
  .option('--transport <transports>', 'rabbitmq, sqs, or both (comma-separated)', 'rabbitmq,sqs')
  .option('--out <path>', 'report file', DEFAULT_REPORT)
  .parse();

const SUITES = ['relay', 'reserve'] as const;
const opts = program.opts<{
  messages: string;
  runs: string;
  batchSize: string;
  concurrency: string;
  window: string;
  consumers: string;
  prefetch: string;
  skus: string;
  transport: string;
  out: string;
}>();
const chosen = (program.args.length ? program.args : [...SUITES]) as string[];
for (const s of chosen) {
  if (!(SUITES as readonly string[]).includes(s))
    program.error(`unknown suite "${s}" (known: ${SUITES.join(', ')})`);
}

const env = loadEnv();
await requireServices({
  postgres: env.DATABASE_URL,
  rabbitmq: env.AMQP_URL,
  rabbitManagement: env.RABBITMQ_MANAGEMENT_URL,
});

const figures: Record<string, BenchFigure> = {};
const transports = opts.transport.split(',').map((t) => t.trim());
if (chosen.includes('relay') && transports.includes('rabbitmq')) {
  progress(`relay → RabbitMQ: ${opts.messages} messages × ${opts.runs} runs`);
  Object.assign(
    figures,
    await benchRelayRabbit(env, {
      messages: Number(opts.messages),
      runs: Number(opts.runs),
      batchSize: Number(opts.batchSize),
      concurrency: Number(opts.concurrency),
      window: Number(opts.window),
    }),
  );
}
if (chosen.includes('reserve') && transports.includes('rabbitmq')) {
  progress(
    `reserve on RabbitMQ (worker mode, inbox on): ${opts.messages} messages × ${opts.runs} runs`,
  );
  Object.assign(
    figures,
    await benchReserveRabbit(env, {
      messages: Number(opts.messages),
      runs: Number(opts.runs),
      concurrency: Number(opts.consumers),
      prefetch: Number(opts.prefetch),
      skus: Number(opts.skus),
    }),
  );
}
const sqsSuites = chosen.filter((s): s is 'relay' | 'reserve' => s === 'relay' || s === 'reserve');
if (transports.includes('sqs') && sqsSuites.length > 0) {
  progress(`${sqsSuites.join(' and ')} on SQS: ${opts.messages} messages × ${opts.runs} runs`);
  Object.assign(
    figures,
    await benchSqs(
      env,
      {
        messages: Number(opts.messages),
        runs: Number(opts.runs),
        batchSize: Number(opts.batchSize),
        concurrency: Number(opts.concurrency),
        skus: Number(opts.skus),
      },
      sqsSuites,
    ),
  );
}
await writeFigures(opts.out, figures);
console.log('\nbenchmark          value            baseline         ratio');
for (const [name, f] of Object.entries(figures)) {
  console.log(
    `${name.padEnd(18)} ${`${f.value} ${f.unit}`.padEnd(16)} ${`${f.baseline} ${f.unit.replace('events', 'msg')}`.padEnd(16)} ${f.ratio}`,
  );
}
console.log(`\nwritten to ${opts.out}`);
