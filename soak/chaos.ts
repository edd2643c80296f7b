import { setTimeout as sleep } from 'node:timers/promises';
import type { Supervised } from '../devkit/processes.js';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { between, pick, type Random, rng } from './plan.js';
import type { SoakTransport } from './transports.js';

/** The pipeline's roles, each a supervised process. */
export interface Roles {
  api: Supervised;
  relay: Supervised;
  consumer: Supervised;
}

/** Fault counts by kind (`kill-consumer`, `broker-outage:<label>`, `fault-point:<point>`, …). */
export type Count = (kind: string, n?: number) => void;

export interface ChaosOptions {
  transport: string;
  seed: number;
  /** The fault phase; broker outages are spread evenly over it. */
  durationMs: number;
  brokerOutages: number;
  /** Pause between two faults, drawn uniformly from [min, max]. */
  faultGapMs: [number, number];
  progress: (line: string) => void;
}

/** The faults besides the broker outages, by weight. */
const KINDS = [
  { kind: 'kill-consumer', weight: 35 },
  { kind: 'kill-relay', weight: 30 },
  { kind: 'db-terminate', weight: 25 },
  { kind: 'kill-api', weight: 10 },
];

/** Fault points a restarted incarnation may carry (`FAULTS=point:exit`). */
const FAULT_POINTS: Record<string, string[]> = {
  relay: ['relay.after-publish:exit'],
  consumer: ['reserve.after-commit:exit', 'reserve.after-retry-publish:exit'],
  api: ['order.after-outbox-insert:exit'],
};

/**
 * Starts the fault schedule: broker outages at evenly spread moments of the fault phase, and
 * beside them, every few seconds, a SIGKILL of a role (sometimes arming a fault point in its next
 * incarnation) or the termination of the pipeline's database connections. `stop` ends both
 * loops and resolves once the fault in progress is over.
 */
export function startChaos(c: {
  o: ChaosOptions;
  transport: Pick<SoakTransport, 'brokerOutage' | 'outageLabel'>;
  roles: Roles;
  /** The controller's pool, and the database whose connections are terminated. */
  db: PgDatabase;
  database: string;
  r: Random;
  count: Count;
}): { startedAt: number; stop(): Promise<void> } {
  const { o, roles, r, count } = c;
  const startedAt = Date.now();
  let stopFaults = false;
  const outages = (async () => {
    const ro = rng(o.seed ^ 0xb10c);
    for (let k = 1; k <= o.brokerOutages; k++) {
      const at = startedAt + (o.durationMs * k) / (o.brokerOutages + 1);
      while (!stopFaults && Date.now() < at) await sleep(Math.min(500, at - Date.now()));
      if (stopFaults) return;
      const downMs = between(ro, 1_000, 3_000);
      const label = c.transport.outageLabel;
      count(`broker-outage:${label}`);
      o.progress(`[${o.transport}] fault: broker outage (${label}, ~${Math.round(downMs)} ms)`);
      await c.transport.brokerOutage(downMs).catch((err) => {
        o.progress(`[${o.transport}] broker outage failed: ${(err as Error).message}`);
      });
    }
  })();
  const others = (async () => {
    const total = KINDS.reduce((s, k) => s + k.weight, 0);
    while (!stopFaults) {
      await sleep(between(r, o.faultGapMs[0], o.faultGapMs[1]));
      if (stopFaults) break;
      const kind = weighted(r() * total, KINDS);
      if (kind === 'db-terminate') {
        const n = await terminateConnections(c.db, c.database);
        count('db-terminate');
        count('db-connections-terminated', n);
        continue;
      }
      const target =
        kind === 'kill-relay' ? roles.relay : kind === 'kill-api' ? roles.api : roles.consumer;
      // Sometimes the next incarnation carries a fault point: it dies there on its own.
      if (r() < 0.3) target.armNext(pick(r, FAULT_POINTS[target.role] ?? ['']));
      if (target.kill()) count(kind);
    }
  })();
  return {
    startedAt,
    async stop() {
      stopFaults = true;
      await others;
      await outages;
    },
  };
}

/** Calm: no armed fault point left (an armed incarnation is restarted clean), everything up. */
export async function calm(children: readonly Supervised[]): Promise<void> {
  for (const child of children) {
    child.armNext('');
    if (child.armedFaults) child.kill();
  }
  await Promise.all(children.map((child) => child.waitReady(120_000)));
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
