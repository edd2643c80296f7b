import type { RetryBudget } from '../../config/env.js';
import { DEFAULT_RETENTION } from '../../config/env.js';
import { ConfigError } from '../../config/errors.js';
import { libraryMigrations } from '../../db/libraryMigrations.js';
import { migrate } from '../../db/migrate.js';
import { type Envelope, newEnvelope } from '../../envelope/envelope.js';
import type { Backend, ParkedEntry, RunningConsumer, Topology } from '../../port/types.js';
import { backendFromConfig, isTransportName, TRANSPORT_NAMES } from '../../transport/index.js';
import { pollUntil } from '../../util/async.js';
import {
  checkDatabaseServer,
  createScratchDatabase,
  FaultyDatabase,
  type ScratchDatabase,
  scratchName,
} from './database.js';
import { ChildWorker } from './process.js';
import { instrument, journalInto, Observer } from './recorder.js';
import { writeReport } from './report.js';
import { KIT_BUDGET, SCENARIOS, type Scenario, type ScenarioContext } from './scenarios.js';
import { loadSubject, modulePath } from './subject.js';
import {
  KIT_TRANSPORTS,
  type KitNamespace,
  type KitTransport,
  startConsumer,
} from './transports.js';
import {
  type ConformanceOptions,
  type ConformanceReport,
  type ConformanceSubject,
  type MessageTimeline,
  SCENARIO_NAMES,
  type ScenarioAccounting,
  type ScenarioName,
  type ScenarioResult,
} from './types.js';

const DEFAULT_EVENTS = 8;
const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_CONCURRENCY = 3;

/** The stream the kit publishes the subject's events on. */
const KIT_STREAM = 'conformance';

/**
 * The scratch namespace's topology: one stream, and one subscription taking the subject's event
 * types (and the scenario's extra ones), with the retry ladder and its parking lot.
 */
const kitTopology = (types: readonly string[]): Topology => ({
  streams: { [KIT_STREAM]: 'conformance' },
  subscriptions: {
    subject: { queue: 'conformance.subject', stream: KIT_STREAM, types, failures: 'retries' },
  },
});

/** The largest batch of a consumer process (so that a crash leaves work behind). */
const CHILD_BATCH = 2;
/** Timelines shown per failing scenario at most. */
const MAX_TIMELINES = 12;

/**
 * Runs the conformance scenarios against a subject on one transport: each scenario on a scratch
 * database and a broker namespace of its own (both removed after), the subject's handler consumed
 * through the backend, faults injected around it, and its effects accounted for. Resolves with the
 * report (written to `out` when given); rejects only when the run cannot start (a service that
 * does not answer, an unknown transport or scenario, a subject module that cannot be used).
 */
export async function runConformance(options: ConformanceOptions): Promise<ConformanceReport> {
  const started = Date.now();
  const transport = options.transport;
  if (!isTransportName(transport)) {
    throw new ConfigError(
      `unknown transport "${transport}" (one of: ${TRANSPORT_NAMES.join(', ')})`,
    );
  }
  const asked = options.scenarios ?? SCENARIO_NAMES;
  const unknown = asked.filter((n) => !(SCENARIO_NAMES as readonly string[]).includes(n));
  if (unknown.length > 0) {
    throw new ConfigError(
      `unknown scenario ${unknown.join(', ')} (one of: ${SCENARIO_NAMES.join(', ')})`,
    );
  }
  const names = SCENARIO_NAMES.filter((n) => asked.includes(n));
  const events = options.events ?? DEFAULT_EVENTS;
  if (!Number.isInteger(events) || events < 2 || events > 1_000) {
    throw new ConfigError(`events must be a whole number from 2 to 1000, got ${events}`);
  }
  const subjectModule =
    typeof options.subject === 'string' ? modulePath(options.subject) : undefined;
  const subject =
    typeof options.subject === 'string' ? await loadSubject(options.subject) : options.subject;
  const kit = KIT_TRANSPORTS[transport];
  await checkDatabaseServer(options.services.databaseUrl);
  await kit.preflight?.(options.services);

  const run: Run = { options, transport, kit, subject, subjectModule, events };
  const results = await inTurn(names, options.concurrency ?? DEFAULT_CONCURRENCY, async (name) => {
    const result = await runScenario(run, SCENARIOS[name]);
    options.onResult?.(result);
    return result;
  });
  const report: ConformanceReport = {
    transport,
    subject: { consumer: subject.consumer, ...(subjectModule ? { module: subjectModule } : {}) },
    startedAt: new Date(started).toISOString(),
    durationMs: Date.now() - started,
    events,
    passed: results.every((r) => r.status !== 'fail'),
    results,
  };
  if (options.out) await writeReport(report, options.out);
  return report;
}

interface Run {
  options: ConformanceOptions;
  transport: string;
  kit: KitTransport;
  subject: ConformanceSubject;
  subjectModule: string | undefined;
  events: number;
}

/** `fn` over `items`, `limit` at a time, results in the items' order. */
async function inTurn<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i] as T);
    }
  });
  await Promise.all(lanes);
  return results;
}

/** What a scenario set up, to take down whatever happened. */
interface Resources {
  database?: ScratchDatabase;
  namespace?: KitNamespace;
  backend?: Backend;
  consumers: RunningConsumer[];
  children: ChildWorker[];
}

async function runScenario(run: Run, scenario: Scenario): Promise<ScenarioResult> {
  const started = Date.now();
  const base = {
    scenario: scenario.name,
    transport: run.transport,
    expectation: scenario.expectation,
  };
  const reason = scenario.notApplicable?.({
    notShared: run.kit.notShared,
    subjectModule: run.subjectModule,
    lease: run.kit.lease,
  });
  if (reason) {
    return {
      ...base,
      status: 'n/a',
      reason,
      facts: {},
      differences: [],
      durationMs: 0,
      timelines: [],
    };
  }
  const observer = new Observer();
  const facts: ScenarioResult['facts'] = {};
  const differences: string[] = [];
  const labels = new Map<string, string>();
  const res: Resources = { consumers: [], children: [] };
  let accounting: ScenarioAccounting | undefined;
  let wrong: string[] = [];
  let effects = new Map<string, number>();
  let good: Envelope[] = [];
  try {
    const budget = scenario.budget ?? KIT_BUDGET;
    const name = scratchName(scenario.name);
    res.database = await createScratchDatabase(run.options.services.databaseUrl, name);
    const db = res.database.db;
    await migrate(db, [
      ...(run.subject.outboxes ? libraryMigrations({ outboxes: run.subject.outboxes }) : []),
      ...(await run.subject.migrations()),
    ]);
    const faulty = new FaultyDatabase(db, observer);

    good = Array.from({ length: run.events }, (_, i) => newEnvelope(run.subject.event(i)));
    for (const [i, e] of good.entries()) labels.set(e.id.toLowerCase(), `event ${i}`);
    checkEvents(good);
    const types = [...new Set([...good.map((e) => e.type), ...(scenario.extraTypes ?? [])])];

    res.namespace = await run.kit.namespace(run.options.services, name, {
      consumer: run.subject.consumer,
      topology: kitTopology(types),
      budget,
      retention: DEFAULT_RETENTION,
      ...(run.options.logger ? { logger: run.options.logger } : {}),
    });
    const backend = backendFromConfig(run.transport, res.namespace.config);
    res.backend = backend;
    await backend.prepare('consume');

    const ctx = context(run, scenario, {
      observer,
      faulty,
      good,
      labels,
      facts,
      differences,
      budget,
      backend,
      database: res.database,
      namespace: res.namespace,
      res,
      deadline: started + (run.options.timeoutMs ?? DEFAULT_TIMEOUT_MS),
    });
    await scenario.run(ctx);
    await stopConsumers(res);

    effects = lowerKeys(await run.subject.effects(db));
    const lot = await backend.parkingLot().list(1_000);
    ({ accounting, wrong } = account(good, ctx.accepted, effects, lot));
    differences.push(...expectationDifferences(scenario, accounting, ctx.accepted, good));
  } catch (err) {
    differences.push(`the run failed: ${(err as Error).message}`);
  } finally {
    await teardown(res, facts);
  }
  const status = differences.length === 0 ? 'pass' : 'fail';
  return {
    ...base,
    status,
    ...(accounting ? { accounting } : {}),
    facts,
    differences,
    durationMs: Date.now() - started,
    timelines: status === 'fail' ? timelines(observer, labels, good, wrong, effects) : [],
  };
}

/** Distinct event ids: one id per event. */
function checkEvents(events: readonly Envelope[]): void {
  const ids = new Set(events.map((e) => e.id.toLowerCase()));
  if (ids.size !== events.length) {
    throw new Error(`the subject's event(i) gave ${events.length - ids.size} events the same id`);
  }
}

const lowerKeys = (m: Map<string, number>) =>
  new Map([...m].map(([k, v]) => [k.toLowerCase(), v] as const));

function context(
  run: Run,
  scenario: Scenario,
  s: {
    observer: Observer;
    faulty: FaultyDatabase;
    good: Envelope[];
    labels: Map<string, string>;
    facts: ScenarioResult['facts'];
    differences: string[];
    budget: RetryBudget;
    backend: Backend;
    database: ScratchDatabase;
    namespace: KitNamespace;
    res: Resources;
    deadline: number;
  },
): ScenarioContext {
  const accepted = new Set<string>();
  const goodIds = new Set(s.good.map((e) => e.id.toLowerCase()));
  let timedOut = false;
  const ctx: ScenarioContext = {
    scenario: scenario.name,
    observer: s.observer,
    faulty: s.faulty,
    events: s.good,
    accepted,
    duplicateWindowMs: s.backend.capabilities.publishDeduplication
      ? (run.kit.duplicateWindowMs ?? 0)
      : 0,
    lease: run.kit.lease,
    facts: s.facts,
    differences: s.differences,
    extraEvent: (i, type) => {
      const e = run.subject.event(run.events + i);
      return newEnvelope(type ? { ...e, type } : e);
    },
    label: (id, label) => s.labels.set(id.toLowerCase(), label),
    async publish(envelopes) {
      const at = Date.now();
      const outcomes = await s.backend.publisher(KIT_STREAM).publish(envelopes);
      for (const o of outcomes) {
        const id = o.id.toLowerCase();
        if (o.ok && goodIds.has(id)) accepted.add(id);
        s.observer.record({
          at,
          id,
          step: 'published',
          detail: o.ok
            ? o.duplicate
              ? 'confirmed, dropped by the broker as a duplicate'
              : 'confirmed'
            : `refused: ${o.reason}: ${o.error}`,
        });
      }
      return outcomes;
    },
    async start(instrumentation = {}) {
      const handler = instrument(
        run.subject.handler({
          db: s.faulty,
          budget: s.budget,
          ...(run.options.logger ? { logger: run.options.logger } : {}),
        }),
        { ...instrumentation, recorder: s.observer },
      );
      const consumer = await startConsumer(s.backend, run.kit, handler, {
        journal: journalInto(s.observer),
      });
      s.res.consumers.push(consumer);
      return consumer;
    },
    async startChild({ label, pauseAfterHandlerMs, leased }) {
      const child = new ChildWorker(
        {
          subject: run.subjectModule as string,
          transport: run.transport,
          config: {
            ...(JSON.parse(JSON.stringify(s.namespace.config)) as Record<string, unknown>),
            ...(leased ? run.kit.lease?.childConfig : {}),
          },
          databaseUrl: s.database.url,
          budget: s.budget,
          maxBatch: CHILD_BATCH,
          pauseAfterHandlerMs,
          label,
        },
        (o) => s.observer.record(o),
      );
      s.res.children.push(child);
      await child.ready(Math.max(5_000, s.deadline - Date.now()));
      return child;
    },
    effects: async () => lowerKeys(await run.subject.effects(s.database.db)),
    parked: () => s.backend.parkingLot().list(1_000),
    async redrive(ids) {
      const result = await s.backend.parkingLot().redrive({ ids: [...ids] }, { rate: 100 });
      return result.moved.map((id) => id.toLowerCase());
    },
    async waitUntil(what, check) {
      if (timedOut) return false;
      const left = s.deadline - Date.now();
      const held = left > 0 && (await pollUntil(check, { timeoutMs: left, intervalMs: 50 }));
      if (held) return true;
      timedOut = true;
      const seconds = Math.round((run.options.timeoutMs ?? DEFAULT_TIMEOUT_MS) / 1000);
      s.differences.push(`timed out after ${seconds} s waiting for ${what}`);
      return false;
    },
    settledAll(ids, copies = () => 1) {
      const list = [...ids];
      return ctx.waitUntil('every message settled', () =>
        list.every(
          (id) => s.observer.settled(id) >= copies(id) && s.observer.lastDeliverySettled(id),
        ),
      );
    },
  };
  return ctx;
}

/** The accounting, and which events make up its counts. */
interface Accounted {
  accounting: ScenarioAccounting;
  /** Lost, applied more than once, or applied though not a good event. */
  wrong: string[];
}

function account(
  good: readonly Envelope[],
  accepted: ReadonlySet<string>,
  effects: ReadonlyMap<string, number>,
  lot: readonly ParkedEntry[],
): Accounted {
  const ids = good.map((e) => e.id.toLowerCase());
  const known = new Set(ids);
  const parked = new Set(lot.map((p) => p.diagnosis.messageId?.toLowerCase()));
  const n = (id: string) => effects.get(id) ?? 0;
  const lost = ids.filter((id) => accepted.has(id) && n(id) === 0 && !parked.has(id));
  const duplicated = ids.filter((id) => n(id) > 1);
  const unexpected = [...effects].filter(([id, count]) => count > 0 && !known.has(id));
  return {
    accounting: {
      events: ids.length,
      accepted: ids.filter((id) => accepted.has(id)).length,
      appliedOnce: ids.filter((id) => n(id) === 1).length,
      lost: lost.length,
      duplicated: duplicated.length,
      parked: ids.filter((id) => parked.has(id)).length,
      unexpected: unexpected.length,
    },
    wrong: [...lost, ...duplicated, ...unexpected.map(([id]) => id)],
  };
}

/** Where the accounting differs from what every scenario expects. */
function expectationDifferences(
  scenario: Scenario,
  a: ScenarioAccounting,
  accepted: ReadonlySet<string>,
  good: readonly Envelope[],
): string[] {
  const out: string[] = [];
  if (a.accepted < a.events) {
    out.push(`${a.events - a.accepted} of ${a.events} events not confirmed by the publisher`);
  }
  if (a.lost > 0) out.push(`${a.lost} events lost (no effect, not parked)`);
  if (a.duplicated > 0) {
    out.push(
      `${a.duplicated} events applied more than once${
        scenario.name === 'rollback-after-effect'
          ? ": their effect outlived a rolled-back transaction (written through `db` instead of the transaction's executor?)"
          : ''
      }`,
    );
  }
  if (a.parked > 0) out.push(`${a.parked} events left parked`);
  if (a.unexpected > 0) {
    out.push(
      `${a.unexpected} effects of messages that were not good events (a poison message applied?)`,
    );
  }
  const missing = good.filter((e) => accepted.has(e.id.toLowerCase())).length - a.appliedOnce;
  if (missing > 0 && a.lost === 0 && a.duplicated === 0 && a.parked === 0) {
    out.push(`${missing} accepted events not applied exactly once`);
  }
  return out;
}

/**
 * The timelines that explain a failure: the events accounted wrong, the messages left unsettled
 * and the poison messages not parked; else (a failure of the run itself) every message.
 */
function timelines(
  observer: Observer,
  labels: ReadonlyMap<string, string>,
  good: readonly Envelope[],
  wrong: readonly string[],
  effects: ReadonlyMap<string, number>,
): MessageTimeline[] {
  const goodIds = new Set(good.map((e) => e.id.toLowerCase()));
  const all = [...labels.keys()];
  const unsettled = all.filter((id) =>
    goodIds.has(id)
      ? observer.deliveries(id) > 0 && !observer.lastDeliverySettled(id)
      : observer.parks(id).length === 0,
  );
  const chosen = [...new Set([...wrong, ...unsettled])];
  const ids = (chosen.length > 0 ? chosen : all).slice(0, MAX_TIMELINES);
  const marks = observer.observations.filter((o) => o.id === null);
  const end = Date.now();
  return ids.map((id) => ({
    messageId: id,
    label: labels.get(id) ?? 'not a message of the run',
    entries: [
      ...[...observer.of(id), ...marks]
        .sort((x, y) => x.at - y.at)
        .map((o) => {
          const detail = [o.process ? `[${o.process}]` : '', o.detail ?? '']
            .filter(Boolean)
            .join(' ');
          return { atMs: o.at - observer.started, step: o.step, ...(detail ? { detail } : {}) };
        }),
      {
        atMs: end - observer.started,
        step: 'effects',
        detail: `${effects.get(id) ?? 0} in the database at the end`,
      },
    ],
  }));
}

async function stopConsumers(res: Resources): Promise<void> {
  for (const c of res.consumers.splice(0)) await c.stop().catch(() => {});
  for (const c of res.children.splice(0)) await c.stop().catch(() => {});
}

/** Removes whatever the scenario set up; what could not be removed goes into the facts. */
async function teardown(res: Resources, facts: ScenarioResult['facts']): Promise<void> {
  const left: string[] = [];
  const attempt = async (what: string, fn: () => Promise<unknown>) => {
    try {
      await fn();
    } catch (err) {
      left.push(`${what}: ${(err as Error).message}`);
    }
  };
  await stopConsumers(res);
  if (res.backend) await attempt('backend', () => (res.backend as Backend).close());
  if (res.namespace) await attempt('namespace', () => (res.namespace as KitNamespace).delete());
  if (res.database) await attempt('database', () => (res.database as ScratchDatabase).drop());
  if (left.length > 0) facts.cleanup = left.join('; ');
}

export type { ScenarioName };
