import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AURORA_AUTO_PAUSE,
  type DataApiServer,
  startDataApiServer,
} from '../devkit/emulators/dataApiServer.js';
import { freePort } from '../devkit/freePort.js';
import { type Exit, Supervised } from '../devkit/processes.js';
import { createScratch, type ScratchEnvironment } from '../devkit/scratch.js';
import { SERVICES } from '../shared/pipeline/schema.js';
import { calm, dbPause, type Roles, startChaos } from './chaos.js';
import { drain } from './drain.js';
import { placeOrders, seedStock } from './load.js';
import { makePlan, rng } from './plan.js';
import {
  type BrokerFault,
  type RabbitConsumer,
  RETRY_ENV,
  rabbitmqTransport,
  type SoakTransport,
  sqsTransport,
} from './transports.js';
import { readJournals, verify } from './verify.js';

export type { BrokerFault, RabbitConsumer } from './transports.js';

/** How the soak stands up each transport it runs on (`--transport`). */
const SOAK_TRANSPORTS = {
  rabbitmq: (scratch: ScratchEnvironment, o: SoakOptions) =>
    rabbitmqTransport(scratch, o.brokerFault, o.consumer),
  sqs: (scratch: ScratchEnvironment, _o: SoakOptions, logDir: string) =>
    sqsTransport(scratch, logDir),
} as const;

export type SoakTransportName = keyof typeof SOAK_TRANSPORTS;

export interface SoakOptions {
  transport: SoakTransportName;
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
  /** Outbox rows the relay cannot publish, written among the orders. */
  badRows: number;
  /** RabbitMQ only: the worker (default) or the reserve function behind the Amazon MQ trigger. */
  consumer?: RabbitConsumer;
  /** Pause between two faults, drawn uniformly from [min, max]. */
  faultGapMs: [number, number];
  /**
   * How the roles reach the database: node-postgres (default), or the RDS Data API through one
   * endpoint the controller hosts over the scratch database, whose cluster can pause (`db-pause`).
   */
  db?: 'pg' | 'data-api';
  /**
   * With `data-api`: pauses of the cluster while orders flow (default 2), and one more in a quiet
   * spell of the API halfway through the orders (no order is placed meanwhile).
   */
  dbPauses?: number;
  /** With `data-api`: how long a resume takes (default AWS's 15 s); the quiet spell lasts 1.5×. */
  resumeMs?: number;
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

/**
 * One transport's report: the verdict (soak/verify.ts), the settings, the faults by kind, the
 * child exits nobody asked for (a crash on its own, by role, with its last log lines), the
 * placement and the timings.
 */
export type SoakReport = Awaited<ReturnType<typeof runSoak>>;

/**
 * Runs the soak on one transport: a scratch environment (database, virtual host or SQS server),
 * the pipeline's roles under supervision, load and chaos side by side, calm, drain, verify, clean
 * up. The pieces: soak/transports.ts (each broker's outage, depth and parking lot), soak/load.ts
 * (orders through the HTTP API), soak/chaos.ts (the fault schedule), soak/drain.ts (the end
 * state), soak/verify.ts (the invariants).
 */
export async function runSoak(o: SoakOptions) {
  const t0 = Date.now();
  const logDir = join(o.logDir, o.transport);
  mkdirSync(logDir, { recursive: true });
  const plan = makePlan({ seed: o.seed, orders: o.orders, poison: o.poison });
  const r = rng(o.seed ^ 0x5eed);
  const faults: Record<string, number> = {};
  const count = (kind: string, n = 1) => {
    faults[kind] = (faults[kind] ?? 0) + n;
  };

  const scratch = await createScratch(
    {
      ...o.services,
      // where the SQS soak starts its own server (unused elsewhere)
      sqsEndpoint: `http://127.0.0.1:${await freePort()}`,
    },
    'soak',
    {
      name: `rm_soak_${o.transport}${o.consumer === 'amazonmq' ? '_amq' : ''}${o.db === 'data-api' ? '_dapi' : ''}_${process.pid}_${(o.seed >>> 0).toString(36)}`,
      transports: [o.transport],
      poolSize: 4,
      keep: o.keep,
      // each service in its own database, as they run
      layout: 'services',
    },
  );
  const dbs = { orders: scratch.databases.orders.db, inventory: scratch.databases.inventory.db };
  let transport: SoakTransport | undefined;
  let cluster: DataApiServer | undefined;
  const children: Supervised[] = [];
  try {
    await seedStock(dbs.inventory, plan);
    transport = await SOAK_TRANSPORTS[o.transport](scratch, o, logDir);

    // --- the database through the Data API: one endpoint for every role, its cluster pausable
    const resumeMs = o.resumeMs ?? AURORA_AUTO_PAUSE.resumeMs;
    if (o.db === 'data-api') {
      const url = new URL(scratch.database.url);
      // its sessions are the pipeline's: the db-terminate fault finds them by this name
      url.searchParams.set('application_name', 'dev-data-api');
      cluster = await startDataApiServer({
        databaseUrl: url.toString(),
        // never idle while the relay polls: the chaos pauses it (db-pause)
        autoPause: {
          secondsUntilAutoPause: AURORA_AUTO_PAUSE.defaultSecondsUntilAutoPause,
          resumeMs,
        },
      });
    }

    // --- the pipeline's roles, each in its own supervised process
    const apiPort = await freePort();
    const roles = startRoles(
      o,
      {
        ...(cluster ? { DATA_API_ENDPOINT: cluster.endpoint } : {}),
        DATABASE_URL: scratch.databases.orders.url,
        INVENTORY_DATABASE_URL: scratch.databases.inventory.url,
        RABBITMQ_MANAGEMENT_URL: o.services.managementUrl,
        POWERTOOLS_LOG_LEVEL: 'WARN',
        POWERTOOLS_DEV: 'false',
        DB_POOL_MAX: '4',
        ...RETRY_ENV,
        ...transport.childEnv,
      },
      { logDir, apiPort, consumerArgs: transport.consumerArgs },
    );
    children.push(roles.api, roles.relay, roles.consumer);
    for (const c of children) c.start();
    await Promise.all(children.map((c) => c.waitReady(120_000)));
    const startupMs = Date.now() - t0;
    o.progress(
      `[${o.transport}] pipeline up in ${(startupMs / 1000).toFixed(1)} s; placing ${o.orders} orders (${o.poison} poison) over ≥ ${o.durationMs / 1000} s under faults`,
    );

    // --- load and chaos, side by side (through the Data API: a quiet spell halfway, in which
    // the cluster pauses; the first order after it meets the resume)
    const pausable = cluster;
    const load = placeOrders(
      o,
      plan,
      dbs.orders,
      `http://127.0.0.1:${apiPort}`,
      r,
      pausable
        ? {
            fromIndex: Math.floor(plan.orders.length / 2),
            ms: Math.round(resumeMs * 1.5),
            during: async () => {
              if (dbPause(pausable, count, 'db-pause:quiet')) {
                o.progress(`[${o.transport}] fault: the cluster paused in a quiet spell`);
              }
            },
          }
        : undefined,
    );
    // terminations of the consumer's own database sessions: 3 behind the Amazon MQ trigger
    const consumerDbTerminations = o.consumer === 'amazonmq' ? 3 : 0;
    const chaos = startChaos({
      o: { ...o, consumerDbTerminations, dbPauses: o.dbPauses ?? 2 },
      transport,
      roles,
      dbs,
      databases: SERVICES.map((s) => scratch.databases[s].name),
      r,
      count,
      ...(cluster ? { cluster } : {}),
    });
    const placement = await load;
    const placementMs = Date.now() - chaos.startedAt;
    o.progress(
      `[${o.transport}] all ${o.orders} orders placed in ${(placementMs / 1000).toFixed(1)} s (${placement.retries} HTTP retries)`,
    );
    const remaining = o.durationMs - (Date.now() - chaos.startedAt);
    if (remaining > 0) await sleep(remaining);
    await chaos.stop();
    const faultPhaseMs = Date.now() - chaos.startedAt;
    // what the SQS fault layer did (armed is counted by the chaos; acted is what reached a client)
    const layer = transport.sqsFaults;
    for (const kind of new Set(layer?.events.map((e) => e.kind))) {
      count(`sqs-layer-acted:${kind}`, layer?.count(kind));
    }

    // --- calm: no armed fault points left, everything up
    await calm(children);
    o.progress(
      `[${o.transport}] faults stopped after ${(faultPhaseMs / 1000).toFixed(1)} s: ${JSON.stringify(faults)}`,
    );

    // --- drain: wait on the end state, or on quiescence (stuck), with a timeout
    const tDrain = Date.now();
    await drain(o, dbs, plan, transport.queueDepth);
    const drainMs = Date.now() - tDrain;

    // what the pauses did: resumes, and the calls refused while they ran
    if (cluster) {
      const stats = cluster.pauseStats();
      count('db-resumes', stats.resumes);
      count('db-calls-refused', stats.refused);
    }

    // --- verify
    const supervised = [...children, ...transport.processes];
    for (const [, exit] of collectExits(supervised)) {
      if (exit.faultPoint && !exit.byController) count(`fault-point:${exit.faultPoint}`);
    }
    const parkedNow = await transport.parked();
    const journals = readJournals(roles.consumer.readAllLogs());
    const verdict = await verify({
      dbs,
      plan,
      parked: parkedNow,
      journals,
      badRows: chaos.badRows,
    });
    if (placement.refused.length > 0) {
      verdict.violations.push(
        `${placement.refused.length} orders refused by the API (first: ${JSON.stringify(placement.refused[0])})`,
      );
      verdict.ok = false;
    }
    const selfExits = collectExits(supervised)
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
        brokerFault: transport.outageSetting,
        badRows: o.badRows,
        consumer: transport.consumerMode,
        consumerDbTerminations,
        db: o.db ?? 'pg',
        ...(cluster ? { dbPauses: o.dbPauses ?? 2, resumeMs } : {}),
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
    const failed = (err: unknown) => o.progress(`cleanup: ${(err as Error).message}`);
    await transport?.close().catch(failed);
    await cluster?.close().catch(failed);
    await scratch.close().catch(failed);
  }
}

/**
 * The API, the relay and the consumer (`bin/dev.ts` roles), supervised, not started yet; with
 * `data-api`, each through the controller's endpoint (`DATA_API_ENDPOINT` in `childEnv`).
 */
function startRoles(
  o: Pick<SoakOptions, 'transport' | 'db'>,
  childEnv: Record<string, string>,
  where: { logDir: string; apiPort: number; consumerArgs: string[] },
): Roles {
  const role = (name: string, extra: string[], ready: RegExp, env: Record<string, string> = {}) =>
    new Supervised(
      {
        role: name,
        args: [
          '--import',
          'tsx',
          'bin/dev.ts',
          '--transport',
          o.transport,
          ...(o.db === 'data-api' ? ['--db', 'data-api'] : []),
          '--role',
          name,
          ...extra,
        ],
        env: { ...childEnv, ...env },
        ready,
      },
      { logDir: where.logDir, restartDelayMs: 300 },
    );
  return {
    api: role('api', ['--port', String(where.apiPort)], /api: listening/),
    relay: role('relay', ['--relay-loop'], /relay: draining/),
    // INFO: the consumer's journal lines are how we count effects per message id
    consumer: role('consumer', where.consumerArgs, /consumer: /, { POWERTOOLS_LOG_LEVEL: 'INFO' }),
  };
}

function collectExits(supervised: readonly Supervised[]): [Supervised, Exit][] {
  return supervised.flatMap((c) => c.exits.map((e) => [c, e] as [Supervised, Exit]));
}

/** The last few lines of a log file (why a process exited on its own). */
function lastLines(path: string, n = 3): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-n).join('\n').slice(-600);
  } catch {
    return '';
  }
}
