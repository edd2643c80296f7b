import type { SQSClient } from '@aws-sdk/client-sqs';
import { startConsumer } from '../devkit/consumers.js';
import type { ScratchEnvironment } from '../devkit/scratch.js';
import { localTransport } from '../devkit/transports/index.js';
import { waitFor } from '../devkit/waitFor.js';
import { CONFIGURATIONS } from '../lab/configurations.js';
import {
  effectCounts,
  ensurePeerSchema,
  parseOrderCreated,
  reserveEffect,
  reserveEffectIn,
} from '../peers/effect.js';
import { CONSUMER_PEERS, pgTransactionalOutboxRelay } from '../peers/index.js';
import type { PeerConsumer, PeerInput } from '../peers/types.js';
import { packageVersion } from '../peers/versions.js';
import { TEST_RETRY_BUDGET } from '../shared/config/budget.js';
import type { Env } from '../shared/config/env.js';
import { Journal } from '../shared/consumer/journal.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import type { Envelope } from '../shared/envelope/envelope.js';
import { ReserveInventory } from '../shared/inventory/ReserveInventory.js';
import { setStock } from '../shared/inventory/stock.js';
import { createLogger } from '../shared/logger.js';
import { OutboxRelay } from '../shared/outbox/OutboxRelay.js';
import { OutboxStore } from '../shared/outbox/OutboxStore.js';
import { RABBITMQ_NAMES } from '../shared/pipeline/names.js';
import type { Backend } from '../shared/port/types.js';
import { createSqsClient } from '../shared/transport/sqs/index.js';
import type { DeployedTransport } from './deployed.js';
import {
  BENCH_BACKEND,
  countOf,
  orderEvents,
  orderQueuesPurger,
  publishAmqp,
  withBenchEnvironment,
} from './environment.js';
import { quantile } from './load.js';
import { progress } from './progress.js';
import { median } from './report.js';
import { rawSend } from './sqs.js';

/** One row of `peers` in reports/bench.json: ours beside a peer doing the same job. */
export interface PeerRow {
  peer: string;
  /** `consumer on sqs`, `consumer on rabbitmq`, `relay to rabbitmq: …`. */
  job: string;
  ours: number;
  theirs: number;
  unit: string;
  /** ours ÷ theirs (for a lag, theirs ÷ ours): above 1 means ours did better either way. */
  ratio: number;
  /** The guarantee each side held in this run (measured: applied twice, lost). */
  guarantee: { ours: string; theirs: string };
  samples: { ours: number[]; theirs: number[] };
  versions: Record<string, string>;
}

export interface PeersBenchOptions {
  messages: number;
  runs: number;
  concurrency: number;
  batchSize: number;
  skus: number;
  transports: DeployedTransport[];
  /** Limit to these peers (default: all that apply to the transports). */
  peers?: string[];
  /** Relay lag run: events per second offered, for `lagSeconds`. */
  lagRate: number;
  lagSeconds: number;
  redisUrl: string;
}

const versionsOf = (packages: string[]) =>
  Object.fromEntries(packages.map((p) => [p, packageVersion(p)]));

/**
 * Every measurement gets queues of its own: a stopped consumer's abandoned long poll may still
 * take messages from the queue it polled (they stay invisible for the visibility timeout).
 */
let measurement = 0;

const ratio = (a: number, b: number) => (b > 0 ? Math.round((a / b) * 100) / 100 : Number.NaN);

/** A row: the medians of ours and theirs, the ratio (`inverse`: theirs ÷ ours), the samples. */
function peerRow(
  row: Omit<PeerRow, 'ours' | 'theirs' | 'ratio' | 'samples'>,
  ours: number[],
  theirs: number[],
  inverse = false,
): PeerRow {
  const a = Math.round(median(ours));
  const b = Math.round(median(theirs));
  return {
    ...row,
    ours: a,
    theirs: b,
    ratio: inverse ? ratio(b, a) : ratio(a, b),
    samples: { ours: ours.map(Math.round), theirs: theirs.map(Math.round) },
  };
}

/** Where the envelopes go: the run's virtual host, its SQS server. */
interface Destinations {
  scratch: ScratchEnvironment;
  sqs: SQSClient | undefined;
}

type Send<I extends PeerInput = PeerInput> = (
  input: I,
  envelopes: Envelope[],
  to: Destinations,
) => Promise<unknown>;

/**
 * Sends the envelopes to a consumer's input, not timed, by its kind: to an SQS queue 10 per call,
 * 8 calls in flight; on an AMQP confirm channel (persistent, JSON, message id).
 */
const SENDS: { [K in PeerInput['kind']]: Send<Extract<PeerInput, { kind: K }>> } = {
  sqs: (input, envelopes, to) => rawSend(to.sqs as SQSClient, input.queueUrl, envelopes),
  amqp: (input, envelopes, to) =>
    publishAmqp(to.scratch.vhost?.amqpUrl as string, input, envelopes),
};
const sendTo: Send = (input, envelopes, to) => (SENDS[input.kind] as Send)(input, envelopes, to);

/** Waits until `count` distinct effects are committed; returns the seconds since `started`. */
async function untilCommitted(
  count: () => Promise<number>,
  expected: number,
  started: number,
): Promise<number> {
  await waitFor(async () => (await count()) >= expected, {
    timeoutMs: 600_000,
    intervalMs: 20,
    message: `${expected} effects committed`,
  });
  return (performance.now() - started) / 1000;
}

/**
 * The same check on both sides: every order reserves one unit, so the stock reserved in total
 * tells effects applied twice (above the orders) and orders lost (below), whoever deduplicated.
 */
async function stockCheck(
  db: PgDatabase,
  orders: number,
): Promise<{ appliedTwice: number; lost: number }> {
  const { rows } = await db.query<{ reserved: number }>(
    'SELECT coalesce(sum(reserved), 0)::int AS reserved FROM stock',
  );
  const reserved = rows[0]?.reserved ?? 0;
  return { appliedTwice: Math.max(0, reserved - orders), lost: Math.max(0, orders - reserved) };
}

interface ConsumerRun {
  rate: number;
  appliedTwice: number;
  lost: number;
}

/** Our backend on each transport, prepared on queues of its own, and its consumer's input. */
const OURS: Record<
  DeployedTransport,
  (to: Destinations, round: number) => Promise<{ backend: Backend; input: PeerInput }>
> = {
  sqs: async ({ scratch, sqs }, round) => {
    const backend = scratch.backend('sqs', BENCH_BACKEND, {
      ...(sqs ? { client: sqs } : {}),
      prefix: `${scratch.sqsPrefix}ours${round}-`,
      visibilityTimeoutSeconds: 60,
    });
    await backend.prepare();
    return { backend, input: { kind: 'sqs', queueUrl: (await backend.queues()).sourceUrl } };
  },
  rabbitmq: async ({ scratch }, round) => {
    const backend = scratch.backend('rabbitmq', BENCH_BACKEND, {
      connectionName: `bench-ours-${round}`,
    });
    await backend.prepare();
    const { ordersExchange: exchange, inventoryQueue: queue } = RABBITMQ_NAMES;
    return { backend, input: { kind: 'amqp', exchange, routingKey: 'order.created', queue } };
  },
};

/**
 * Our consumer on this transport (its first consume mode: the Lambda trigger emulation on SQS,
 * the worker on RabbitMQ), `messages` already queued: messages/s until every reservation is
 * committed.
 */
async function oursConsumer(
  to: Destinations,
  transport: DeployedTransport,
  o: PeersBenchOptions,
  round: number,
): Promise<ConsumerRun> {
  const db = new PgDatabase({ connectionString: to.scratch.database.url, max: o.concurrency + 2 });
  try {
    await db.query('TRUNCATE processed_messages, reservations, inventory_outbox');
    await db.query('UPDATE stock SET reserved = 0');
    const envelopes = orderEvents(o.messages, o.skus);
    const { backend, input } = await OURS[transport](to, round);
    await sendTo(input, envelopes, to);
    const journal = new Journal();
    const useCase = new ReserveInventory({ db, journal }, { budget: TEST_RETRY_BUDGET });
    const started = performance.now();
    const consumer = await startConsumer(backend, (m) => useCase.process(m), {
      mode: backend.capabilities.consumeModes[0],
      journal,
      logger: createLogger('bench'),
      batchSize: o.batchSize,
      concurrency: o.concurrency,
      functionTimeoutMs: 10_000,
    });
    const count = () => countOf(db, 'SELECT count(*)::int AS n FROM reservations');
    const seconds = await untilCommitted(count, o.messages, started);
    await consumer.stop();
    await backend.close();
    return { rate: o.messages / seconds, ...(await stockCheck(db, o.messages)) };
  } finally {
    await db.close();
  }
}

/** A peer consumer on the same work: messages/s until every effect is committed. */
async function peerConsumer(
  scratch: ScratchEnvironment,
  peer: PeerConsumer,
  o: PeersBenchOptions,
  sqs: { client: SQSClient; endpoint: string; region: string } | undefined,
  round: number,
): Promise<ConsumerRun> {
  const db = new PgDatabase({ connectionString: scratch.database.url, max: o.concurrency + 2 });
  try {
    await db.query('TRUNCATE peer_effects');
    await db.query('UPDATE stock SET reserved = 0');
    const envelopes = orderEvents(o.messages, o.skus);
    const namespace = `${scratch.sqsPrefix}${peer.id.replace('peer-', '')}${round}-`;
    // the peer creates its queues and starts; its input is empty until we send
    const running = await peer.start({
      namespace,
      db,
      databaseUrl: scratch.database.url,
      ...(sqs ? { sqs } : {}),
      ...(scratch.vhost ? { amqpUrl: scratch.vhost.amqpUrl } : {}),
      redisUrl: o.redisUrl,
      concurrency: o.concurrency,
      batchSize: o.batchSize,
      maxDeliveries: 5,
      handle: async (body) => {
        await reserveEffect(db, peer.id, parseOrderCreated(body));
      },
      // a peer with an inbox runs the effect in its own transaction (its processed mark with it)
      handleIn: async (client, body) => {
        await reserveEffectIn(client, peer.id, parseOrderCreated(body));
      },
    });
    try {
      const started = performance.now();
      await sendTo(running.input, envelopes, { scratch, sqs: sqs?.client });
      const count = async () => (await effectCounts(db)).distinct;
      const seconds = await untilCommitted(count, o.messages, started);
      return { rate: o.messages / seconds, ...(await stockCheck(db, o.messages)) };
    } finally {
      await running.stop();
    }
  } finally {
    await db.close();
  }
}

function guaranteeHeld(base: string, runs: ConsumerRun[]): string {
  const twice = runs.reduce((s, r) => s + r.appliedTwice, 0);
  const lost = runs.reduce((s, r) => s + r.lost, 0);
  return `${base}; this run: ${twice} applied twice, ${lost} lost`;
}

const OURS_CONSUMER =
  'effect and inbox claim in one PostgreSQL transaction, ack after COMMIT (exactly-once effect)';

/**
 * `npm run bench -- --suite peers`: our consumer beside each consumer peer (same queue contents,
 * same concurrency and batch size, same effect committed in PostgreSQL), and our relay beside
 * pg-transactional-outbox's (same events, RabbitMQ with confirms). Runs alternate ours / theirs;
 * medians are reported.
 */
export async function benchPeers(env: Env, o: PeersBenchOptions): Promise<PeerRow[]> {
  const rows: PeerRow[] = [];
  const wanted = (id: string) => !o.peers || o.peers.includes(id);
  for (const transport of o.transports) {
    const peers = CONSUMER_PEERS.filter((p) => p.transport === transport && wanted(p.id));
    if (peers.length === 0) continue;
    // the transport's local server (SQS), and a client on it
    const local = await localTransport(transport).startLocal?.(env);
    const endpoint = local?.config.endpoint as string | undefined;
    const client = endpoint
      ? createSqsClient({ endpoint, region: env.AWS_REGION, requestTimeoutMs: 25_000 })
      : undefined;
    const sqs = client && endpoint ? { client, endpoint, region: env.AWS_REGION } : undefined;
    try {
      await withBenchEnvironment(
        env,
        `peers_${transport}`,
        async (scratch) => {
          await ensurePeerSchema(scratch.database.db);
          for (let i = 0; i < o.skus; i++)
            await setStock(scratch.database.db, `SKU-${i}`, 1_000_000);
          for (const peer of peers) {
            const ours: ConsumerRun[] = [];
            const theirs: ConsumerRun[] = [];
            for (let run = 1; run <= o.runs; run++) {
              ours.push(await oursConsumer({ scratch, sqs: client }, transport, o, ++measurement));
              theirs.push(await peerConsumer(scratch, peer, o, sqs, ++measurement));
              progress(
                `  consumer on ${transport}, run ${run}/${o.runs}: ours ${Math.round(ours.at(-1)?.rate ?? 0)} msg/s, ${peer.id} ${Math.round(theirs.at(-1)?.rate ?? 0)} msg/s`,
              );
            }
            const row = {
              peer: peer.id,
              job: `consumer on ${transport}`,
              unit: 'messages/s with the effect committed',
              guarantee: {
                ours: guaranteeHeld(OURS_CONSUMER, ours),
                theirs: guaranteeHeld(peer.guarantee, theirs),
              },
              versions: versionsOf(peer.packages),
            };
            const rate = (r: ConsumerRun) => r.rate;
            rows.push(peerRow(row, ours.map(rate), theirs.map(rate)));
          }
        },
        { transports: [transport], ...(endpoint ? { sqsEndpoint: endpoint } : {}) },
      );
    } finally {
      client?.destroy();
      await local?.stop();
    }
  }
  // the relay peer publishes to its own broker: run it when that transport is asked for
  const relayPeer = CONFIGURATIONS['peer-pg-transactional-outbox'];
  if ((o.transports as readonly string[]).includes(relayPeer.transport) && wanted(relayPeer.id)) {
    rows.push(...(await benchRelayPeer(env, o)));
  }
  return rows;
}

interface RelayRun {
  rate: number;
  lagP99: number;
  lost: number;
}

const p99 = (xs: number[]) =>
  quantile(
    xs.toSorted((a, b) => a - b),
    0.99,
  );

/**
 * Offers `count` events to a relay: `perSecond` events a second in one transaction per 10 ms tick
 * (or as fast as possible when 0), each write timed at its COMMIT.
 */
async function offer(
  count: number,
  perSecond: number,
  write: (batch: Envelope[]) => Promise<void>,
): Promise<void> {
  const events = orderEvents(count, 100);
  const perTick = perSecond > 0 ? Math.max(1, Math.round(perSecond / 100)) : 500;
  const started = performance.now();
  for (let i = 0, tick = 0; i < events.length; i += perTick, tick++) {
    if (perSecond > 0) {
      const due = started + tick * 10;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    await write(events.slice(i, i + perTick));
  }
}

/** Our relay (OutboxRelay, a worker's drain loop) to RabbitMQ with confirms. */
async function oursRelay(
  scratch: ScratchEnvironment,
  o: PeersBenchOptions,
  count: number,
  perSecond: number,
): Promise<RelayRun> {
  const db = scratch.database.db;
  await db.query('TRUNCATE outbox');
  const backend = scratch.backend('rabbitmq', BENCH_BACKEND, { connectionName: 'bench-relay' });
  const publisher = backend.publisher('outbox');
  await publisher.ready();
  const relay = new OutboxRelay(
    { db, publisher },
    { table: 'outbox', batchSize: 500, maxAttempts: 10 },
  );
  const committed = new Map<string, number>();
  const abort = new AbortController();
  const started = performance.now();
  const draining = relay.drain({
    budgetMs: 600_000,
    idleWaitMs: 25,
    concurrency: o.concurrency,
    signal: abort.signal,
  });
  const store = new OutboxStore('outbox');
  await offer(count, perSecond, async (batch) => {
    await db.transaction((tx) => store.appendMany(tx, batch));
    const at = Date.now();
    for (const e of batch) committed.set(e.id, at);
  });
  const published = () =>
    countOf(db, 'SELECT count(*)::int AS n FROM outbox WHERE published_at IS NOT NULL');
  await waitFor(async () => (await published()) >= count, {
    timeoutMs: 600_000,
    intervalMs: 20,
    message: `${count} events published`,
  });
  const seconds = (performance.now() - started) / 1000;
  abort.abort();
  await draining;
  await backend.close();
  const { rows } = await db.query<{ id: string; at: Date }>(
    'SELECT id, published_at AS at FROM outbox WHERE published_at IS NOT NULL',
  );
  const lags = rows.map((r) => r.at.getTime() - (committed.get(r.id) ?? r.at.getTime()));
  return { rate: count / seconds, lagP99: p99(lags), lost: count - rows.length };
}

/** pg-transactional-outbox's relay (its polling listener) to RabbitMQ with confirms. */
async function theirRelay(
  scratch: ScratchEnvironment,
  count: number,
  perSecond: number,
  round: number,
): Promise<RelayRun> {
  const relay = await pgTransactionalOutboxRelay.start({
    databaseUrl: scratch.database.url,
    amqpUrl: scratch.vhost?.amqpUrl as string,
    exchange: RABBITMQ_NAMES.ordersExchange,
    routingKey: 'order.created',
    namespace: `pgto${round}`,
  });
  try {
    const started = performance.now();
    await offer(count, perSecond, (batch) => relay.enqueue(batch));
    await waitFor(() => relay.published() >= count, {
      timeoutMs: 600_000,
      intervalMs: 20,
      message: `${count} events confirmed`,
    });
    const seconds = (performance.now() - started) / 1000;
    const lags = relay.lags();
    return { rate: count / seconds, lagP99: p99(lags), lost: count - relay.published() };
  } finally {
    await relay.stop();
  }
}

async function benchRelayPeer(env: Env, o: PeersBenchOptions): Promise<PeerRow[]> {
  const peer = pgTransactionalOutboxRelay;
  return withBenchEnvironment(
    env,
    'peers_relay',
    async (scratch) => {
      const purge = await orderQueuesPurger(scratch);
      const ours: RelayRun[] = [];
      const theirs: RelayRun[] = [];
      const oursLag: RelayRun[] = [];
      const theirsLag: RelayRun[] = [];
      const lagCount = o.lagRate * o.lagSeconds;
      for (let run = 1; run <= o.runs; run++) {
        await purge();
        ours.push(await oursRelay(scratch, o, o.messages, 0));
        await purge();
        theirs.push(await theirRelay(scratch, o.messages, 0, run));
        await purge();
        oursLag.push(await oursRelay(scratch, o, lagCount, o.lagRate));
        await purge();
        theirsLag.push(await theirRelay(scratch, lagCount, o.lagRate, run + o.runs));
        progress(
          `  relay run ${run}/${o.runs}: ours ${Math.round(ours.at(-1)?.rate ?? 0)} events/s (lag p99 ${Math.round(oursLag.at(-1)?.lagP99 ?? 0)} ms at ${o.lagRate}/s), pg-transactional-outbox ${Math.round(theirs.at(-1)?.rate ?? 0)} events/s (lag p99 ${Math.round(theirsLag.at(-1)?.lagP99 ?? 0)} ms)`,
        );
      }
      await purge();
      const lost = (runs: RelayRun[]) => runs.reduce((s, r) => s + r.lost, 0);
      const guarantee = {
        ours: `row marked only after the broker's confirm (at-least-once publish); this run: ${lost(ours) + lost(oursLag)} unpublished`,
        theirs: `${peer.guarantee}; this run: ${lost(theirs) + lost(theirsLag)} unpublished`,
      };
      const row = {
        peer: 'peer-pg-transactional-outbox',
        guarantee,
        versions: versionsOf(peer.packages),
      };
      const rate = (r: RelayRun) => r.rate;
      const lag = (r: RelayRun) => r.lagP99;
      return [
        peerRow(
          { ...row, job: 'relay to rabbitmq: events/s confirmed and marked', unit: 'events/s' },
          ours.map(rate),
          theirs.map(rate),
        ),
        peerRow(
          {
            ...row,
            job: `relay to rabbitmq: commit-to-confirm lag p99 at ${o.lagRate} events/s`,
            unit: 'ms (lower is better; ratio theirs ÷ ours)',
          },
          oursLag.map(lag),
          theirsLag.map(lag),
          true,
        ),
      ];
    },
    { poolSize: o.concurrency + 4 },
  );
}
