import { resolve } from 'node:path';
import { Command } from 'commander';
import { requireServices } from '../devkit/preflight.js';
import { REDIS_URL, redisProblem } from '../peers/redis.js';
import { loadEnv } from '../shared/config/env.js';
import { RABBITMQ_DEFAULTS } from '../shared/transport/rabbitmq/constants.js';
import { atRestMarkdown, benchCostAtRest } from './atRest.js';
import { benchBundles } from './bundle.js';
import { benchCost, type ConfigurationCost, costMarkdown } from './cost.js';
import { deployedTransports } from './deployed.js';
import { benchE2e } from './e2e.js';
import { parseOptions } from './options.js';
import { benchPeers, type PeerRow } from './peers.js';
import { PRICES } from './prices.js';
import { progress } from './progress.js';
import { benchRelayRabbit } from './relay.js';
import { benchRelayDeployed } from './relayDeployed.js';
import {
  type BenchFigure,
  DEFAULT_REPORT,
  peerTable,
  table,
  writeFigures,
  writeSummary,
} from './report.js';
import { benchReserveRabbit } from './reserve.js';
import { benchScale, SCALE_PHASES, type ScalePhase } from './scale.js';
import { benchSqs } from './sqs.js';

/**
 * `npm run bench [-- <suite…>] [--suite a,b]`: benchmarks, each beside its raw baseline measured in
 * the same run. Suites: relay, reserve, e2e, memory, scale, bundle (default: these), relay-deployed (named only: an hour at rest), peers, cost (per million orders, and the month at rest), cost-at-rest (the month at rest alone). Results are
 * merged into reports/bench.json; reports/bench.md and the printed table summarize them.
 */
const program = new Command('bench').argument('[suites...]', 'suites to run (default: all)', []);
const opts = parseOptions(program, [
  ['--messages <n>', 'messages per run', '20000'],
  ['--runs <n>', 'runs per figure (the median is reported)', '3'],
  ['--batch-size <n>', 'relay rows per round', '500'],
  ['--concurrency <n>', 'relay loops in the process', '2'],
  ['--window <n>', 'confirms outstanding per channel', '1000'],
  ['--consumers <n>', 'reserve: consumers (and raw connections)', '2'],
  [
    '--prefetch <n>',
    'reserve: prefetch per consumer (default: the consumer default, CONSUMER_PREFETCH)',
    String(RABBITMQ_DEFAULTS.prefetch),
  ],
  ['--skus <n>', 'reserve: distinct SKUs (fewer = hotter rows)', '1000'],
  ['--transport <transports>', 'rabbitmq, sqs, or both (comma-separated)', 'rabbitmq,sqs'],
  ['--suite <suites>', 'suites to run, comma-separated (same as the arguments)'],
  ['--rate <n>', 'e2e/memory: offered orders per second', '500'],
  ['--duration <s>', 'e2e/memory: measured seconds at that rate', '60'],
  ['--warmup <s>', 'e2e/memory: seconds at that rate before measuring', '5'],
  ['--raw-duration <s>', 'e2e/memory: seconds of each raw baseline at that rate', '10'],
  ['--max-duration <s>', 'e2e: seconds of each closed-loop saturation run', '5'],
  [
    '--search <from,step,max,seconds>',
    'e2e: step-up search of the sustainable rate ("off" to skip)',
    '250,250,3000,20',
  ],
  ['--log-level <level>', 'e2e/memory: POWERTOOLS_LOG_LEVEL of the roles', 'INFO'],
  ['--profile <dir>', 'e2e/memory: write a CPU profile of each role (node --cpu-prof)'],
  ['--node-options <opts>', 'e2e/memory: NODE_OPTIONS of the roles'],
  ['--scale-rows <n>', 'scale: rows already in outbox / inbox', '1000000'],
  ['--scale-samples <n>', 'scale: relay rounds and reserve calls measured per state', '20'],
  [
    '--scale-phases <phases>',
    `scale: phases, comma-separated (${SCALE_PHASES.join(', ')}; pinned-xmin: ~1.4 min at the default --pin-seconds, ~2.3 min with the unbounded claim)`,
    'rows',
  ],
  [
    '--pin-seconds <s>',
    'scale pinned-xmin: seconds of flow without and with the pinned horizon, in 5-s slices',
    '30',
  ],
  [
    '--pin-alternative <when>',
    'scale pinned-xmin: measure the unbounded claim too (fullClaimEveryMs 0): auto (when the loss reaches 20 %), always, never',
    'auto',
  ],
  [
    '--idle-minutes <n>',
    'relay-deployed: minutes at rest measured for the kick design (61 includes its hourly sweep)',
    '61',
  ],
  [
    '--baseline-idle-minutes <n>',
    'relay-deployed: minutes at rest measured for the schedule-drain baseline (it repeats each minute)',
    '3',
  ],
  ['--burst-seconds <s>', 'relay-deployed: seconds of the burst at --rate', '60'],
  ['--sparse-orders <n>', 'relay-deployed: orders one minute apart', '4'],
  ['--peer-messages <n>', 'peers: messages per run (each side)', '3000'],
  ['--peer-concurrency <n>', 'peers: messages handled at once, both sides', '2'],
  ['--peer-batch <n>', 'peers: messages per receive / invocation, both sides', '10'],
  ['--peer-lag-rate <n>', 'peers: relay lag run, events offered per second', '200'],
  ['--peer-lag-seconds <n>', 'peers: relay lag run, seconds', '10'],
  ['--peers <ids>', 'peers: only these (comma-separated peer ids)'],
  ['--cost-rate <n>', 'cost: orders per second through the HTTP API', '15'],
  ['--cost-seconds <s>', 'cost: seconds measured', '60'],
  [
    '--cost-throughput <n>',
    'cost: orders per second a deployment sustains, for the hourly items (broker, NAT, schedules)',
    '100',
  ],
  ['--out <path>', 'report file', DEFAULT_REPORT],
]);

const SUITES = [
  'relay',
  'reserve',
  'e2e',
  'memory',
  'scale',
  'bundle',
  'relay-deployed',
  'peers',
  'cost',
  'cost-at-rest',
] as const;
/** Run only when named: relay-deployed measures an hour at rest; peers install other libraries' consumers. */
const DEFAULT_SUITES = SUITES.filter(
  (s) => s !== 'relay-deployed' && s !== 'peers' && s !== 'cost' && s !== 'cost-at-rest',
);
const named = [...program.args, ...(opts.suite ?? '').split(',')]
  .map((s) => s.trim())
  .filter(Boolean);
const chosen = named.length ? named : [...DEFAULT_SUITES];
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
const deployed = deployedTransports(transports);
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
if (chosen.includes('e2e') || chosen.includes('memory')) {
  const [from, step, max, seconds] = opts.search.split(',').map(Number);
  progress(
    `end to end (${chosen.includes('e2e') ? 'pipeline figures' : ''}${chosen.includes('e2e') && chosen.includes('memory') ? ' and ' : ''}${chosen.includes('memory') ? 'memory of the roles' : ''}): ${opts.rate} orders/s for ${opts.duration} s`,
  );
  Object.assign(
    figures,
    await benchE2e(env, {
      transports: deployed,
      rate: Number(opts.rate),
      seconds: Number(opts.duration),
      warmupSeconds: Number(opts.warmup),
      rawSeconds: Number(opts.rawDuration),
      maxSeconds: Number(opts.maxDuration),
      search:
        chosen.includes('e2e') && opts.search !== 'off' && from && step && max && seconds
          ? { from, step, max, seconds }
          : undefined,
      skus: Number(opts.skus),
      logLevel: opts.logLevel,
      profileDir: opts.profile ? resolve(opts.profile) : undefined,
      nodeOptions: opts.nodeOptions,
      report: { e2e: chosen.includes('e2e'), memory: chosen.includes('memory') },
    }),
  );
}
if (chosen.includes('scale')) {
  const phases = opts.scalePhases
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const phase of phases) {
    if (!(SCALE_PHASES as readonly string[]).includes(phase))
      program.error(`unknown scale phase "${phase}" (known: ${SCALE_PHASES.join(', ')})`);
  }
  if (!['auto', 'always', 'never'].includes(opts.pinAlternative))
    program.error(`--pin-alternative: auto, always or never, not "${opts.pinAlternative}"`);
  if (phases.includes('rows'))
    progress(
      `cost at scale: relay round and reserve call, empty tables vs ${opts.scaleRows} rows already there`,
    );
  if (phases.includes('pinned-xmin'))
    progress(
      `cost at scale: the relay without and with a session pinning the vacuum horizon, ${opts.pinSeconds} s each`,
    );
  Object.assign(
    figures,
    await benchScale(env, {
      rows: Number(opts.scaleRows),
      samples: Number(opts.scaleSamples),
      batchSize: Number(opts.batchSize),
      phases: phases as ScalePhase[],
      pinSeconds: Number(opts.pinSeconds),
      pinAlternative: opts.pinAlternative as 'auto' | 'always' | 'never',
      concurrency: Number(opts.concurrency),
    }),
  );
}
if (chosen.includes('relay-deployed')) {
  for (const transport of deployed) {
    progress(
      `relay as deployed on ${transport}: the bundles, kicked + ticked vs the 1-minute schedule draining 50 s`,
    );
    const { figures: f } = await benchRelayDeployed(env, {
      transport,
      rate: Number(opts.rate),
      burstSeconds: Number(opts.burstSeconds),
      sparseOrders: Number(opts.sparseOrders),
      sparseGapMs: 60_000,
      idleMinutes: {
        kick: Number(opts.idleMinutes),
        'schedule-drain': Number(opts.baselineIdleMinutes),
      },
    });
    Object.assign(figures, f);
  }
}
let peerRows: PeerRow[] | undefined;
if (chosen.includes('peers')) {
  const redis = await redisProblem(REDIS_URL);
  if (redis) program.error(redis);
  progress(
    `peers: ours beside each peer, ${opts.peerMessages} messages × ${opts.runs} alternated runs, ${opts.peerConcurrency} at once, batches of ${opts.peerBatch}`,
  );
  peerRows = await benchPeers(env, {
    messages: Number(opts.peerMessages),
    runs: Number(opts.runs),
    concurrency: Number(opts.peerConcurrency),
    batchSize: Number(opts.peerBatch),
    skus: Number(opts.skus),
    transports: deployed,
    ...(opts.peers ? { peers: opts.peers.split(',').map((s) => s.trim()) } : {}),
    lagRate: Number(opts.peerLagRate),
    lagSeconds: Number(opts.peerLagSeconds),
    redisUrl: REDIS_URL,
  });
}
let costs: ConfigurationCost[] | undefined;
if (chosen.includes('cost')) {
  progress(
    `cost per million orders: the deployed stacks run locally, every AWS call counted, ${opts.costRate} orders/s for ${opts.costSeconds} s`,
  );
  costs = await benchCost(env, {
    transports: deployed,
    rate: Number(opts.costRate),
    seconds: Number(opts.costSeconds),
    throughput: Number(opts.costThroughput),
  });
}
let atRest: Awaited<ReturnType<typeof benchCostAtRest>> | undefined;
if (chosen.includes('cost') || chosen.includes('cost-at-rest')) {
  progress('a month at rest: the templates counted, the scheduled runs measured on the bundles');
  atRest = await benchCostAtRest(env, deployed);
}
if (chosen.includes('bundle')) {
  progress('Lambda bundle sizes (esbuild, the settings of infra/constructs/NodeFunction.ts)');
  Object.assign(figures, await benchBundles());
}
const report = await writeFigures(opts.out, figures, {
  ...(peerRows ? { peers: peerRows } : {}),
  ...(costs
    ? { cost: { measuredAt: new Date().toISOString(), prices: PRICES, configurations: costs } }
    : {}),
  ...(atRest ? { costAtRest: { prices: PRICES, ...atRest } } : {}),
});
const summary = await writeSummary(opts.out, report);
console.log(`\n${table(figures)}`);
if (peerRows) console.log(`\n${peerTable(peerRows)}`);
if (costs) console.log(`\n${costMarkdown(costs).join('\n')}`);
if (atRest) console.log(`\n${atRestMarkdown(atRest.months).join('\n')}`);
console.log(`\nwritten to ${opts.out} and ${summary}`);
