import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { GetQueueAttributesCommand, GetQueueUrlCommand } from '@aws-sdk/client-sqs';
import pg from 'pg';
import { TcpProxy } from '../devkit/tcpProxy.js';
import { loadBudget, rabbitRetryDelays } from '../shared/config/budget.js';
import { RABBITMQ_NAMES } from '../shared/config/constants.js';
import type { Diagnosis } from '../shared/consumer/types.js';
import { migrate } from '../shared/db/migrate.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { newEnvelope } from '../shared/envelope/envelope.js';
import { OutboxStore } from '../shared/outbox/OutboxStore.js';
import { listParked } from '../shared/transport/rabbitmq/parking.js';
import { RabbitConnection } from '../shared/transport/rabbitmq/RabbitConnection.js';
import {
  amqpUrlForVhost,
  RabbitManagement,
} from '../shared/transport/rabbitmq/RabbitManagement.js';
import { retryQueueName } from '../shared/transport/rabbitmq/topology.js';
import { createSqsClient } from '../shared/transport/sqs/client.js';
import { sqsQueueNames } from '../shared/transport/sqs/names.js';
import { sqsParkingLot } from '../shared/transport/sqs/parking.js';
import { type Exit, Supervised } from './children.js';
import {
  between,
  makePlan,
  type Plan,
  type PlannedOrder,
  pick,
  poisonPayload,
  type Random,
  rng,
} from './plan.js';
import { readJournals, type SoakVerdict, verify } from './verify.js';

const run = promisify(execFile);

export type Transport = 'rabbitmq' | 'sqs';

/** How the broker goes down: the real broker restarted, or a TCP proxy in front of it cut. */
export type BrokerFault = 'restart' | 'proxy';

export interface SoakOptions {
  transport: Transport;
  orders: number;
  /** Poison events among the orders (parked by the consumer with a diagnosis). */
  poison: number;
  /** The fault phase lasts at least this long, and until every order is placed. */
  durationMs: number;
  seed: number;
  /** RabbitMQ only: `restart` = rabbitmqctl stop_app/start_app (shared broker!); `proxy` = cut. */
  brokerFault: BrokerFault;
  /** Broker outages per run, evenly spread over the fault phase. */
  brokerOutages: number;
  /** Pause between two faults, drawn uniformly from [min, max]. */
  faultGapMs: [number, number];
  drainTimeoutMs: number;
  /** Concurrent HTTP clients placing orders. */
  clients: number;
  services: { databaseUrl: string; amqpUrl: string; managementUrl: string };
  /** Where child logs go (one folder per transport under it). */
  logDir: string;
  /** Keep the database and virtual host afterwards. */
  keep: boolean;
  progress: (line: string) => void;
}

export interface SoakReport extends SoakVerdict {
  transport: Transport;
  seed: number;
  settings: Record<string, unknown>;
  faults: Record<string, number>;
  /** Child exits nobody asked for (a crash on its own), by role, with their last log lines. */
  selfExits: { role: string; code: number | null; signal: string | null; tail: string }[];
  placement: {
    requests: number;
    retries: number;
    /** 200 answers: an earlier attempt had placed the order, its answer was lost. */
    idempotentRepeats: number;
    refused: { orderId: string; status: number; body: string }[];
  };
  timings: {
    startupMs: number;
    placementMs: number;
    faultPhaseMs: number;
    drainMs: number;
    totalMs: number;
  };
  logDir: string;
}

const RETRY_ENV = {
  RETRY_LADDER_MS: '1000,2000,3000',
  RETRY_MAX_ATTEMPTS: '3',
  RETRY_MAX_AGE_MS: '600000',
  RETRY_JITTER: '0.1',
};

/** Runs the soak on one transport: setup, load under faults, drain, verify, clean up. */
export async function runSoak(o: SoakOptions): Promise<SoakReport> {
  const t0 = Date.now();
  const name = `rm_soak_${o.transport}_${process.pid}_${(o.seed >>> 0).toString(36)}`;
  const logDir = join(o.logDir, o.transport);
  mkdirSync(logDir, { recursive: true });
  const plan = makePlan({ seed: o.seed, orders: o.orders, poison: o.poison });
  const r = rng(o.seed ^ 0x5eed);
  const faults: Record<string, number> = {};
  const count = (kind: string, n = 1) => {
    faults[kind] = (faults[kind] ?? 0) + n;
  };
  const cleanups: (() => Promise<void>)[] = [];
  const children: Supervised[] = [];

  const dbUrl = withDatabase(o.services.databaseUrl, name);
  await admin(o.services.databaseUrl, `CREATE DATABASE ${name}`);
  cleanups.push(async () => {
    if (!o.keep)
      await admin(o.services.databaseUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  });
  const db = new PgDatabase({
    connectionString: dbUrl,
    max: 4,
    applicationName: 'soak-controller',
  });
  cleanups.push(() => db.close());

  try {
    await migrate(db);
    await seedStock(db, plan);

    // --- the broker, and the children's view of it
    const childEnv: Record<string, string> = {
      DATABASE_URL: dbUrl,
      RABBITMQ_MANAGEMENT_URL: o.services.managementUrl,
      POWERTOOLS_LOG_LEVEL: 'WARN',
      POWERTOOLS_DEV: 'false',
      DB_POOL_MAX: '4',
      ...RETRY_ENV,
    };
    let brokerOutage: (downMs: number) => Promise<void>;
    let queueDepth: () => Promise<number>;
    let parked: () => Promise<Diagnosis[]>;
    let fauxqs: Supervised | undefined;
    const management = new RabbitManagement(o.services.managementUrl);
    if (o.transport === 'rabbitmq') {
      await management.createVhost(name);
      cleanups.push(async () => {
        if (!o.keep) await management.deleteVhost(name);
      });
      const direct = amqpUrlForVhost(o.services.amqpUrl, name);
      childEnv.AMQP_URL = direct;
      if (o.brokerFault === 'proxy') {
        const target = new URL(o.services.amqpUrl);
        const proxy = await new TcpProxy(target.hostname, Number(target.port || 5672)).start();
        cleanups.push(() => proxy.close());
        const via = new URL(direct);
        via.hostname = '127.0.0.1';
        via.port = String(proxy.port);
        childEnv.AMQP_URL = via.toString();
        brokerOutage = async (downMs) => {
          proxy.cut();
          try {
            await sleep(downMs);
          } finally {
            proxy.restore();
          }
        };
      } else {
        brokerOutage = async (downMs) => {
          await run('rabbitmqctl', ['stop_app'], { timeout: 60_000 });
          try {
            await sleep(downMs);
          } finally {
            await startRabbit();
          }
        };
      }
      const connection = new RabbitConnection({ url: direct, connectionName: 'soak-controller' });
      cleanups.push(() => connection.close());
      const budget = loadBudget(RETRY_ENV);
      queueDepth = () =>
        connection.withChannel(async (ch) => {
          let n = 0;
          for (const q of [
            RABBITMQ_NAMES.inventoryQueue,
            ...rabbitRetryDelays(budget).map((d) => retryQueueName(d)),
          ]) {
            n += (await ch.checkQueue(q)).messageCount;
          }
          return n;
        }, 10_000);
      parked = async () =>
        (await listParked(connection, 100_000)).map((p) => ({
          ...p.diagnosis,
          via: p.via,
        }));
    } else {
      const port = await freePort();
      const dataDir = mkdtempSync(join(tmpdir(), 'rm-soak-fauxqs-'));
      cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
      fauxqs = new Supervised(
        {
          role: 'fauxqs',
          args: ['--import', 'tsx', 'devkit/emulators/fauxqsProcess.ts', String(port), dataDir],
          env: {},
          ready: /fauxqs: listening/,
        },
        { logDir, restartDelayMs: 1_500 },
      );
      fauxqs.start();
      cleanups.push(() => fauxqs?.stop() ?? Promise.resolve());
      await fauxqs.waitReady();
      const endpoint = `http://127.0.0.1:${port}`;
      Object.assign(childEnv, {
        SQS_ENDPOINT: endpoint,
        SQS_QUEUE_PREFIX: 'soak-',
        // crashed consumers' messages come back after 10 s, not 30
        SQS_VISIBILITY_TIMEOUT_S: '10',
        FUNCTION_TIMEOUT_MS: '1500',
      });
      const sqs = fauxqs;
      brokerOutage = async (downMs) => {
        // SIGKILL; the supervisor starts it again on the same port and data directory
        sqs.kill({ restartAfterMs: downMs });
        await sqs.waitReady(60_000).catch(() => {});
      };
      const client = createSqsClient({ endpoint, region: 'us-east-1', maxAttempts: 3 });
      cleanups.push(async () => client.destroy());
      const names = sqsQueueNames('soak-');
      const urlOf = async (queue: string) =>
        (await client.send(new GetQueueUrlCommand({ QueueName: queue }))).QueueUrl as string;
      queueDepth = async () => {
        const out = await client.send(
          new GetQueueAttributesCommand({
            QueueUrl: await urlOf(names.source),
            AttributeNames: [
              'ApproximateNumberOfMessages',
              'ApproximateNumberOfMessagesNotVisible',
              'ApproximateNumberOfMessagesDelayed',
            ],
          }),
        );
        const a = out.Attributes ?? {};
        return (
          Number(a.ApproximateNumberOfMessages ?? 0) +
          Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
          Number(a.ApproximateNumberOfMessagesDelayed ?? 0)
        );
      };
      parked = async () => {
        const lot = sqsParkingLot({
          client,
          sourceUrl: await urlOf(names.source),
          parkingUrl: await urlOf(names.parking),
        });
        return (await lot.list(100_000)).map((p) => ({ ...p.diagnosis, via: p.via }));
      };
    }

    // --- the pipeline's roles, each in its own supervised process
    const apiPort = await freePort();
    const role = (name: string, extra: string[], env: Record<string, string>, ready: RegExp) => {
      const child = new Supervised(
        {
          role: name,
          args: ['--import', 'tsx', 'bin/dev.ts', '--transport', o.transport, ...extra],
          env: { ...childEnv, ...env },
          ready,
        },
        { logDir, restartDelayMs: 300 },
      );
      children.push(child);
      return child;
    };
    const api = role('api', ['--role', 'api', '--port', String(apiPort)], {}, /api: listening/);
    const relay = role('relay', ['--role', 'relay'], {}, /relay: draining/);
    // INFO: the consumer's journal lines are how we count effects per message id
    const consumer = role(
      'consumer',
      ['--role', 'consumer'],
      { POWERTOOLS_LOG_LEVEL: 'INFO' },
      /consumer: /,
    );
    for (const c of children) c.start();
    await Promise.all(children.map((c) => c.waitReady(120_000)));
    const startupMs = Date.now() - t0;
    o.progress(
      `[${o.transport}] pipeline up in ${(startupMs / 1000).toFixed(1)} s; placing ${o.orders} orders (${o.poison} poison) over ≥ ${o.durationMs / 1000} s under faults`,
    );

    // --- load and chaos, side by side
    const load = placeOrders(o, plan, db, `http://127.0.0.1:${apiPort}`, r);
    const tFaults = Date.now();
    let stopFaults = false;
    // Broker outages at evenly spread moments of the fault phase, beside the other faults.
    const outages = (async () => {
      const ro = rng(o.seed ^ 0xb10c);
      for (let k = 1; k <= o.brokerOutages; k++) {
        const at = tFaults + (o.durationMs * k) / (o.brokerOutages + 1);
        while (!stopFaults && Date.now() < at) await sleep(Math.min(500, at - Date.now()));
        if (stopFaults) return;
        const downMs = between(ro, 1_000, 3_000);
        const label = o.transport === 'sqs' ? 'sqs-server-restart' : `rabbitmq-${o.brokerFault}`;
        count(`broker-outage:${label}`);
        o.progress(`[${o.transport}] fault: broker outage (${label}, ~${Math.round(downMs)} ms)`);
        await brokerOutage(downMs).catch((err) => {
          o.progress(`[${o.transport}] broker outage failed: ${(err as Error).message}`);
        });
      }
    })();
    const chaos = (async () => {
      const kinds = [
        { kind: 'kill-consumer', weight: 35 },
        { kind: 'kill-relay', weight: 30 },
        { kind: 'db-terminate', weight: 25 },
        { kind: 'kill-api', weight: 10 },
      ];
      const total = kinds.reduce((s, k) => s + k.weight, 0);
      while (!stopFaults) {
        await sleep(between(r, o.faultGapMs[0], o.faultGapMs[1]));
        if (stopFaults) break;
        const kind = weighted(r() * total, kinds);
        if (kind === 'db-terminate') {
          const n = await terminateConnections(db, name);
          count('db-terminate');
          count('db-connections-terminated', n);
          continue;
        }
        const target = kind === 'kill-relay' ? relay : kind === 'kill-api' ? api : consumer;
        // Sometimes the next incarnation carries a fault point: it dies there on its own.
        if (r() < 0.3) target.armNext(pick(r, FAULT_POINTS[target.role] ?? ['']));
        if (target.kill()) count(kind);
      }
    })();

    const placement = await load;
    const placementMs = Date.now() - tFaults;
    o.progress(
      `[${o.transport}] all ${o.orders} orders placed in ${(placementMs / 1000).toFixed(1)} s (${placement.retries} HTTP retries)`,
    );
    const remaining = o.durationMs - (Date.now() - tFaults);
    if (remaining > 0) await sleep(remaining);
    stopFaults = true;
    await chaos;
    await outages;
    const faultPhaseMs = Date.now() - tFaults;

    // --- calm: no armed fault points left, everything up
    for (const c of children) {
      c.armNext('');
      if (c.armedFaults) c.kill(); // restarted clean
    }
    await Promise.all(children.map((c) => c.waitReady(120_000)));
    o.progress(
      `[${o.transport}] faults stopped after ${(faultPhaseMs / 1000).toFixed(1)} s: ${JSON.stringify(faults)}`,
    );

    // --- drain: wait on the end state, or on quiescence (stuck), with a timeout
    const tDrain = Date.now();
    await drain(o, db, plan, queueDepth);
    const drainMs = Date.now() - tDrain;

    // --- verify
    for (const [, exit] of collectExits(children, fauxqs)) {
      if (exit.faultPoint && !exit.byController) count(`fault-point:${exit.faultPoint}`);
    }
    const parkedNow = await parked();
    const journals = readJournals(consumer.readAllLogs());
    const verdict = await verify({ db, plan, parked: parkedNow, journals });
    if (placement.refused.length > 0) {
      verdict.violations.push(
        `${placement.refused.length} orders refused by the API (first: ${JSON.stringify(placement.refused[0])})`,
      );
      verdict.ok = false;
    }
    const selfExits = [...collectExits(children, fauxqs)]
      .filter(([, e]) => !e.byController && !e.faultPoint)
      .map(([child, e]) => ({
        role: e.role,
        code: e.code,
        signal: e.signal,
        tail: lastLines(child.logs[e.incarnation - 1] ?? ''),
      }));
    for (const e of selfExits) {
      verdict.warnings.push(
        `${e.role} exited on its own (${e.code ?? e.signal}): ${e.tail.replace(/\s+/g, ' ').slice(0, 200)}`,
      );
    }
    return {
      transport: o.transport,
      seed: o.seed,
      settings: {
        orders: o.orders,
        poison: o.poison,
        durationMs: o.durationMs,
        brokerFault:
          o.transport === 'sqs' ? 'restart (fauxqs with SQLite persistence)' : o.brokerFault,
        faultGapMs: o.faultGapMs,
        retry: RETRY_ENV,
      },
      ...verdict,
      faults,
      selfExits,
      placement,
      timings: {
        startupMs,
        placementMs,
        faultPhaseMs,
        drainMs,
        totalMs: Date.now() - t0,
      },
      logDir,
    };
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    for (const c of cleanups.reverse()) {
      await c().catch((err) => o.progress(`cleanup: ${(err as Error).message}`));
    }
  }
}

/** The kind whose cumulative weight first exceeds `x`. */
function weighted(x: number, kinds: { kind: string; weight: number }[]): string {
  let rest = x;
  for (const k of kinds) {
    rest -= k.weight;
    if (rest < 0) return k.kind;
  }
  return kinds[0]?.kind ?? '';
}

/** Fault points a restarted incarnation may carry (`FAULTS=point:exit`). */
const FAULT_POINTS: Record<string, string[]> = {
  relay: ['relay.after-publish:exit'],
  consumer: ['reserve.after-commit:exit', 'reserve.after-retry-publish:exit'],
  api: ['order.after-outbox-insert:exit'],
};

function collectExits(children: Supervised[], fauxqs?: Supervised): [Supervised, Exit][] {
  return [...children, ...(fauxqs ? [fauxqs] : [])].flatMap((c) =>
    c.exits.map((e) => [c, e] as [Supervised, Exit]),
  );
}

/** The last few lines of a log file (why a process exited on its own). */
function lastLines(path: string, n = 3): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-n).join('\n').slice(-600);
  } catch {
    return '';
  }
}

async function startRabbit(): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await run('rabbitmqctl', ['start_app'], { timeout: 60_000 });
      await run('rabbitmqctl', ['await_startup'], { timeout: 60_000 });
      return;
    } catch (err) {
      if (attempt >= 5) throw err;
      await sleep(1_000);
    }
  }
}

/** Terminates the pipeline processes' database connections (their pools reconnect). */
async function terminateConnections(db: PgDatabase, database: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n
       FROM pg_stat_activity
      WHERE datname = $1 AND application_name LIKE 'dev-%' AND pid <> pg_backend_pid()`,
    [database],
  );
  return rows[0]?.n ?? 0;
}

async function seedStock(db: PgDatabase, plan: Plan): Promise<void> {
  await db.query(
    `INSERT INTO stock (sku, available)
     SELECT key, value::int FROM jsonb_each_text($1::jsonb)`,
    [JSON.stringify(Object.fromEntries(plan.stock))],
  );
}

interface Placement {
  requests: number;
  retries: number;
  idempotentRepeats: number;
  refused: { orderId: string; status: number; body: string }[];
}

/**
 * Places every planned order through the HTTP API at a steady pace (so faults hit a flowing
 * pipeline), retrying with the same orderId after a 5xx or a lost connection, as a client must.
 * Poison events are written straight to the database (the API only accepts good orders).
 */
async function placeOrders(
  o: SoakOptions,
  plan: Plan,
  db: PgDatabase,
  apiUrl: string,
  r: Random,
): Promise<Placement> {
  const result: Placement = { requests: 0, retries: 0, idempotentRepeats: 0, refused: [] };
  const start = Date.now();
  const spacing = (o.durationMs * 0.8) / Math.max(1, plan.orders.length);
  const deadline = start + o.durationMs + 600_000;
  let next = 0;
  const poisonStore = new OutboxStore('outbox');
  const placeOne = async (order: PlannedOrder) => {
    if (order.poison) {
      await placePoison(db, poisonStore, order, r, deadline);
      return;
    }
    const body = JSON.stringify({
      sku: order.sku,
      quantity: order.quantity,
      orderId: order.orderId,
    });
    for (let attempt = 1; ; attempt++) {
      result.requests++;
      try {
        const res = await fetch(`${apiUrl}/orders`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-correlation-id': `soak-${order.index}`,
          },
          body,
          signal: AbortSignal.timeout(15_000),
        });
        const text = await res.text();
        if (res.status === 201) return;
        if (res.status === 200) {
          result.idempotentRepeats++;
          return;
        }
        if (res.status < 500) {
          result.refused.push({
            orderId: order.orderId,
            status: res.status,
            body: text.slice(0, 300),
          });
          return;
        }
      } catch {
        // connection refused or reset (the API restarting), or a timeout: same order again
      }
      if (Date.now() > deadline) {
        result.refused.push({
          orderId: order.orderId,
          status: 0,
          body: 'gave up: API unreachable',
        });
        return;
      }
      result.retries++;
      await sleep(Math.min(2_000, 100 * attempt));
    }
  };
  const worker = async () => {
    for (;;) {
      const i = next++;
      const order = plan.orders[i];
      if (!order) return;
      const wait = start + i * spacing - Date.now();
      if (wait > 0) await sleep(wait);
      await placeOne(order);
    }
  };
  await Promise.all(Array.from({ length: o.clients }, worker));
  return result;
}

/** An order row and an `order.created` event whose data the consumer must refuse. */
async function placePoison(
  db: PgDatabase,
  store: OutboxStore,
  order: PlannedOrder,
  r: Random,
  deadline: number,
): Promise<void> {
  const envelope = newEnvelope({
    type: 'order.created',
    aggregate: { type: 'order', id: order.orderId, version: 1 },
    data: poisonPayload(order, r),
    correlationId: `soak-poison-${order.index}`,
    producer: 'soak',
  });
  for (;;) {
    try {
      await db.transaction(async (tx) => {
        await tx.query(
          `INSERT INTO orders (id, sku, quantity, created_event_id, correlation_id)
           VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
          [order.orderId, order.sku, order.quantity, envelope.id, envelope.correlation_id],
        );
        await store.append(tx, envelope);
      });
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(200);
    }
  }
}

/**
 * Waits until the pipeline has drained: both outboxes published, nothing left in the consumer's
 * queues, and every valid order decided and every poison event parked; or until nothing has moved
 * for a while (stuck: verification says what is missing); or the timeout.
 */
async function drain(
  o: SoakOptions,
  db: PgDatabase,
  plan: Plan,
  queueDepth: () => Promise<number>,
): Promise<void> {
  const valid = plan.orders.filter((x) => !x.poison).length;
  const deadline = Date.now() + o.drainTimeoutMs;
  let lastKey = '';
  let lastChange = Date.now();
  let lastReport = 0;
  while (Date.now() < deadline) {
    let state: { unpublished: number; decided: number; depth: number };
    try {
      const { rows } = await db.query<{ unpublished: number; decided: number }>(
        `SELECT (SELECT count(*) FROM outbox WHERE published_at IS NULL)::int
              + (SELECT count(*) FROM inventory_outbox WHERE published_at IS NULL)::int AS unpublished,
                (SELECT count(*) FROM reservations)::int AS decided`,
      );
      state = {
        unpublished: rows[0]?.unpublished ?? -1,
        decided: rows[0]?.decided ?? -1,
        depth: await queueDepth(),
      };
    } catch (err) {
      o.progress(`[${o.transport}] drain: ${(err as Error).message} (again)`);
      await sleep(1_000);
      continue;
    }
    const key = JSON.stringify(state);
    if (key !== lastKey) {
      lastKey = key;
      lastChange = Date.now();
    }
    if (Date.now() - lastReport > 5_000) {
      lastReport = Date.now();
      o.progress(
        `[${o.transport}] draining: ${state.decided}/${valid} decided, ${state.unpublished} unpublished, ${state.depth} in queues`,
      );
    }
    if (state.unpublished === 0 && state.depth === 0 && state.decided >= valid) return;
    // nothing moves with empty queues and outboxes: stuck; verification says what is missing
    if (state.unpublished === 0 && state.depth === 0 && Date.now() - lastChange > 20_000) return;
    await sleep(1_000);
  }
  o.progress(`[${o.transport}] drain timed out after ${o.drainTimeoutMs / 1000} s`);
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function admin(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: withDatabase(url, 'postgres') });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      s.close(() => resolve(port));
    });
  });
}
