import { setTimeout as sleep } from 'node:timers/promises';
import type { DataApiServer } from '../devkit/emulators/dataApiServer.js';
import type { SqsFault } from '../devkit/emulators/sqsFaults.js';
import type { Supervised } from '../devkit/processes.js';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { newEnvelope } from '../shared/envelope/envelope.js';
import { OutboxStore } from '../shared/outbox/OutboxStore.js';
import type { Service } from '../shared/pipeline/schema.js';
import { between, pick, type Random, rng, uuidFrom } from './plan.js';
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
  /** Outbox rows the relay cannot publish, written among the orders (evenly spread). */
  badRows: number;
  /**
   * Terminations of the consumer's own database sessions, evenly spread over the fault phase,
   * each aimed at a transaction in progress when there is one (the Amazon MQ trigger mode: the
   * batch's transaction dies under the invocation).
   */
  consumerDbTerminations: number;
  /** Pause between two faults, drawn uniformly from [min, max]. */
  faultGapMs: [number, number];
  /**
   * Pauses of the cluster while orders flow (the roles reach the database through the
   * controller's Data API endpoint), evenly spread over the fault phase.
   */
  dbPauses: number;
  progress: (line: string) => void;
}

/** The controller's Data API endpoint, whose cluster the chaos pauses. */
export type PausableDatabase = Pick<DataApiServer, 'pause' | 'pauseStats'>;

/** The faults besides the broker outages, by weight. */
const KINDS = [
  { kind: 'kill-consumer', weight: 35 },
  { kind: 'kill-relay', weight: 30 },
  { kind: 'db-terminate', weight: 25 },
  { kind: 'kill-api', weight: 10 },
];

/**
 * What real SQS queues do that the server does not, armed in the fault layer (SQS only;
 * docs/sqs-faults.md) at evenly spread moments, one kind after the other: a low rate, each acts
 * once (on the next request it concerns), or throttles every request for a second.
 */
const SQS_KINDS: { kind: string; fault: SqsFault }[] = [
  { kind: 'sqs-duplicate', fault: { kind: 'duplicate' } },
  { kind: 'sqs-reorder', fault: { kind: 'reorder' } },
  { kind: 'sqs-partial-batch', fault: { kind: 'partial-batch' } },
  { kind: 'sqs-throttle', fault: { kind: 'throttle', forMs: 1_000 } },
  { kind: 'sqs-lose-delete-response', fault: { kind: 'lose-delete-response' } },
  { kind: 'sqs-stale-receipt', fault: { kind: 'stale-receipt' } },
];

/** Fault points a restarted incarnation may carry (`FAULTS=point:exit`). */
const FAULT_POINTS: Record<string, string[]> = {
  relay: ['relay.after-publish:exit'],
  consumer: ['reserve.after-commit:exit', 'reserve.after-retry-publish:exit'],
  api: ['order.after-outbox-insert:exit'],
};

/**
 * Outbox rows the relay can never publish, as a mixed deploy or a hand edit writes them: each is
 * written valid and then broken, a minute older than the orders flowing around it (so it is at
 * the head of the relay's claim). The relay must set it aside with `reason` and keep publishing.
 */
export const BAD_ROW_KINDS = [
  { kind: 'newer-major', edit: `schema_version = '2.0'`, reason: 'schema_version: major 2' },
  { kind: 'payload-not-object', edit: `payload = '[]'::jsonb`, reason: 'data:' },
  { kind: 'bad-type', edit: `event_type = 'Order Created'`, reason: 'type:' },
] as const;

/** A bad row the chaos wrote: verify expects it set aside, never published, never consumed. */
export interface BadRow {
  id: string;
  kind: (typeof BAD_ROW_KINDS)[number]['kind'];
  /** Part of the reason the relay must record. */
  reason: string;
}

/**
 * Starts the fault schedule: broker outages, bad outbox rows and (through a Data API endpoint)
 * pauses of the cluster at evenly spread moments of the fault phase, and beside them, every few
 * seconds, a SIGKILL of a role (sometimes arming a fault point in its next incarnation) or the
 * termination of the pipeline's database connections. `stop` ends the loops and resolves once
 * the fault in progress is over.
 */
export function startChaos(c: {
  o: ChaosOptions;
  transport: Pick<SoakTransport, 'brokerOutage' | 'outageLabel' | 'sqsFaults'>;
  roles: Roles;
  /**
   * The controller's pools on each service's database (the order service's outbox takes the bad
   * rows; inventory's stock is locked to catch a batch), and the databases whose connections are
   * terminated.
   */
  dbs: Readonly<Record<Service, PgDatabase>>;
  databases: readonly string[];
  r: Random;
  count: Count;
  /** The cluster behind the roles' Data API endpoint (`db-pause`), when they use one. */
  cluster?: PausableDatabase;
}): { startedAt: number; badRows: BadRow[]; stop(): Promise<void> } {
  const { o, roles, r, count } = c;
  const startedAt = Date.now();
  let stopFaults = false;
  let stoppedAt = Number.POSITIVE_INFINITY;
  /** `act(k)` for k = 1…n, each at (k − offset) / parts of the fault phase, unless stopped. */
  const atMoments = (n: number, parts: number, offset: number, act: (k: number) => Promise<void>) =>
    (async () => {
      for (let k = 1; k <= n; k++) {
        const due = startedAt + (o.durationMs * (k - offset)) / parts;
        while (!stopFaults && Date.now() < due) await sleep(Math.min(500, due - Date.now()));
        if (stopFaults) return;
        await act(k);
      }
    })();
  const ro = rng(o.seed ^ 0xb10c);
  const outages = atMoments(o.brokerOutages, o.brokerOutages + 1, 0, async () => {
    const downMs = between(ro, 1_000, 3_000);
    const label = c.transport.outageLabel;
    count(`broker-outage:${label}`);
    o.progress(`[${o.transport}] fault: broker outage (${label}, ~${Math.round(downMs)} ms)`);
    await c.transport.brokerOutage(downMs).catch((err) => {
      o.progress(`[${o.transport}] broker outage failed: ${(err as Error).message}`);
    });
  });
  const badRows: BadRow[] = [];
  const rb = rng(o.seed ^ 0xbad);
  const bad = atMoments(o.badRows, o.badRows, 0.5, async (k) => {
    const spec = BAD_ROW_KINDS[(k - 1) % BAD_ROW_KINDS.length] as (typeof BAD_ROW_KINDS)[number];
    const id = await writeBadRow(c.dbs.orders, spec.edit, uuidFrom(rb));
    badRows.push({ id, kind: spec.kind, reason: spec.reason });
    count('bad-outbox-row');
    o.progress(`[${o.transport}] fault: bad outbox row (${spec.kind}) ${id}`);
  });
  // offset from the broker outages' moments, so the two are apart
  const terminations = o.consumerDbTerminations;
  const consumerSessions = atMoments(terminations, terminations, 0.5, async (k) => {
    // look for a batch in its transaction until the next one's moment; the last one also
    // while the queues drain after the other faults stopped (under kills and outages little
    // is consumed before), for at most LAST_TERMINATION_GRACE_MS more
    const until =
      k < terminations
        ? startedAt + (o.durationMs * (k + 0.5)) / terminations
        : Number.POSITIVE_INFINITY;
    const hit = await terminateConsumerSessions(
      c.dbs.inventory,
      c.databases,
      () => Date.now() >= Math.min(until, stoppedAt + LAST_TERMINATION_GRACE_MS),
    );
    count('db-terminate-consumer');
    count('db-connections-terminated', hit.terminated);
    if (hit.midTransaction) count('db-terminate-consumer:mid-transaction');
  });
  // between the bad rows' moments, one kind after the other
  const layer = c.transport.sqsFaults;
  const kinds = layer ? SQS_KINDS.length : 0;
  const sqsFaults = atMoments(kinds, kinds, 0.25, async (k) => {
    const spec = SQS_KINDS[(k - 1) % SQS_KINDS.length] as (typeof SQS_KINDS)[number];
    layer?.arm(spec.fault);
    count(spec.kind);
    o.progress(`[${o.transport}] fault: SQS fault layer armed: ${spec.kind}`);
  });
  // between the broker outages' and the bad rows' moments
  const cluster = c.cluster;
  const pauses = atMoments(cluster ? o.dbPauses : 0, o.dbPauses, 0.75, async () => {
    if (cluster && dbPause(cluster, count)) {
      o.progress(`[${o.transport}] fault: the cluster paused while orders flow`);
    }
  });
  const others = (async () => {
    const total = KINDS.reduce((s, k) => s + k.weight, 0);
    while (!stopFaults) {
      await sleep(between(r, o.faultGapMs[0], o.faultGapMs[1]));
      if (stopFaults) break;
      const kind = weighted(r() * total, KINDS);
      if (kind === 'db-terminate') {
        const n = await terminateSessions(c.dbs.orders, c.databases, 'dev-%');
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
    badRows,
    async stop() {
      stopFaults = true;
      stoppedAt = Date.now();
      await others;
      await sqsFaults;
      // calm: nothing armed in the fault layer any more (a throttle ends by itself)
      layer?.disarm();
      await outages;
      await bad;
      await consumerSessions;
      await pauses;
    },
  };
}

/**
 * Pauses the cluster now (`db-pause`): the next call starts a resume, and every call until it
 * ends is refused with `DatabaseResumingException` (the API answers 503, the other roles wait).
 * False when it was not running (a resume under way).
 */
export function dbPause(cluster: PausableDatabase, count: Count, kind = 'db-pause'): boolean {
  if (!cluster.pause()) return false;
  count(kind);
  return true;
}

/** Writes one valid `order.created` row of no order, then breaks it with `edit` (one transaction). */
async function writeBadRow(db: PgDatabase, edit: string, aggregateId: string): Promise<string> {
  const envelope = newEnvelope({
    type: 'order.created',
    aggregate: { type: 'order', id: aggregateId, version: 1 },
    data: { orderId: aggregateId, sku: 'SOAK-BAD', quantity: 1 },
    correlationId: 'soak-bad-row',
    producer: 'soak',
    occurredAt: new Date(Date.now() - 60_000),
  });
  for (let attempt = 1; ; attempt++) {
    try {
      await db.transaction(async (tx) => {
        await new OutboxStore('outbox').append(tx, envelope);
        await tx.query(`UPDATE outbox SET ${edit} WHERE id = $1::uuid`, [envelope.id]);
      });
      return envelope.id;
    } catch (err) {
      if (attempt >= 20) throw err;
      await sleep(200);
    }
  }
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

/** How long the last consumer-session termination may wait for a batch after the faults stop. */
const LAST_TERMINATION_GRACE_MS = 20_000;

/**
 * Terminates the consumer role's database sessions (`dev-consumer`) while one of them is inside a
 * batch's transaction. To catch one there (batches take milliseconds), it holds every `stock`
 * row locked meanwhile: the next reserve batch waits on that lock inside its transaction (its
 * `lock_timeout` bounds the wait), and the look and the termination are one statement. It looks
 * every 5 ms until `giveUp()` (no batch came: the consumer was down), then terminates whatever
 * sessions there are.
 */
async function terminateConsumerSessions(
  db: PgDatabase,
  databases: readonly string[],
  giveUp: () => boolean,
): Promise<{ terminated: number; midTransaction: boolean }> {
  const terminate = (inBatchOnly: boolean) =>
    terminateSessions(db, databases, 'dev-consumer', inBatchOnly);
  return db.transaction(async (tx) => {
    await tx.query('SELECT 1 FROM stock FOR UPDATE');
    while (!giveUp()) {
      const hit = await terminate(true);
      if (hit > 0) return { terminated: hit + (await terminate(false)), midTransaction: true };
      await sleep(5);
    }
    return { terminated: await terminate(false), midTransaction: false };
  });
}

/**
 * Terminates the sessions on `databases` of the processes `app` names (a LIKE pattern; their
 * pools reconnect); with `inBatchOnly`, only those inside a batch's transaction.
 */
async function terminateSessions(
  db: PgDatabase,
  databases: readonly string[],
  app: string,
  inBatchOnly = false,
): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n
       FROM pg_stat_activity
      WHERE datname = ANY(string_to_array($1, ',')) AND application_name LIKE $2 AND pid <> pg_backend_pid()
        AND (NOT $3::boolean OR (xact_start IS NOT NULL AND state <> 'idle'
             AND query ~ '(processed_messages|stock|reservations)'))`,
    [databases.join(','), app, inBatchOnly],
  );
  return rows[0]?.n ?? 0;
}
