import type { RetryBudget } from '../../config/env.js';
import type { Envelope } from '../../envelope/envelope.js';
import type { ParkedEntry, PublishOutcome, RunningConsumer } from '../../port/types.js';
import type { FaultyDatabase } from './database.js';
import type { ChildWorker } from './process.js';
import type { Instrumentation, Observer } from './recorder.js';
import type { KitLease } from './transports.js';
import type { ScenarioName } from './types.js';

/** What a scenario drives: one run of its own (database, namespace, backend, consumers). */
export interface ScenarioContext {
  readonly scenario: ScenarioName;
  readonly observer: Observer;
  /** The handler's database, where the faults are injected. */
  readonly faulty: FaultyDatabase;
  /** The run's good events, in index order. */
  readonly events: readonly Envelope[];
  /** Good events the publisher confirmed (their first copy). */
  readonly accepted: Set<string>;
  /**
   * How long the broker drops a second publish of one id (its publish deduplication, as the kit
   * configured it); 0 where it does not.
   */
  readonly duplicateWindowMs: number;
  /** The consumer's lease on a delivery, as the kit set it short; undefined where there is none. */
  readonly lease: KitLease | undefined;
  /** What the scenario measured (reported as it is). */
  readonly facts: Record<string, number | string | boolean>;
  /** Where the expectation did not hold. */
  readonly differences: string[];
  /** A new event (index past the good ones), not one of the good events: poison messages. */
  extraEvent(i: number, type?: string): Envelope;
  /** Names a message in the timelines (`poison (unreadable body)`). */
  label(id: string, label: string): void;
  publish(envelopes: readonly Envelope[]): Promise<PublishOutcome[]>;
  /** The subject's consumer in this process, instrumented. */
  start(instrumentation?: Omit<Instrumentation, 'recorder'>): Promise<RunningConsumer>;
  /** The subject's consumer in a process of its own (`leased`: with the kit's short lease). */
  startChild(options: {
    label: string;
    pauseAfterHandlerMs: number;
    leased?: boolean;
  }): Promise<ChildWorker>;
  /** The subject's effects, by lower-case id (the kit's own connection: never faulty). */
  effects(): Promise<Map<string, number>>;
  parked(): Promise<ParkedEntry[]>;
  redrive(ids: readonly string[]): Promise<string[]>;
  /**
   * Polls `check` until it holds; false (and a difference) when the scenario's time is up. Once
   * the time is up, every later wait fails at once.
   */
  waitUntil(what: string, check: () => Promise<boolean> | boolean): Promise<boolean>;
  /** Every id's last delivery settled for good, and at least `copies(id)` settled deliveries. */
  settledAll(ids: Iterable<string>, copies?: (id: string) => number): Promise<boolean>;
}

export interface Scenario {
  readonly name: ScenarioName;
  /** What must hold, in one line (reported). */
  readonly expectation: string;
  /** Its own retry budget (default: the kit's). */
  readonly budget?: RetryBudget;
  /** Event types it publishes besides the subject's (to be routed). */
  readonly extraTypes?: readonly string[];
  /** Why it cannot run, given what the kit knows; undefined when it can. */
  notApplicable?(run: {
    notShared?: string | undefined;
    subjectModule?: string | undefined;
    lease?: KitLease | undefined;
  }): string | undefined;
  run(ctx: ScenarioContext): Promise<void>;
}

/** The kit's retry budget: 1 s, 2 s, 3 s; three retries; no jitter. */
export const KIT_BUDGET: RetryBudget = {
  ladderMs: [1_000, 2_000, 3_000],
  maxAttempts: 3,
  maxAgeMs: 60_000,
  jitter: 0,
};

/** A budget a long outage outlasts: one retry after 500 ms. */
const SHORT_BUDGET: RetryBudget = { ladderMs: [500], maxAttempts: 1, maxAgeMs: 60_000, jitter: 0 };

/** How long the short outage lasts (the kit's budget rides it out). */
const SHORT_OUTAGE_MS = 2_000;

/** Give-backs of each batch before it may pass. */
const GIVE_BACKS = 3;

/** The type of the poison event the handler does not handle. */
export const UNHANDLED_TYPE = 'conformance.unhandled_type';

const every = <T>(list: readonly T[], step: number) => list.filter((_, i) => i % step === 0);
const idsOf = (events: readonly Envelope[]) => events.map((e) => e.id.toLowerCase());

/** The fault fired at all: otherwise the handler does not work through the database it was given. */
function faultFired(ctx: ScenarioContext): void {
  ctx.facts.faultsInjected = ctx.faulty.injected;
  if (ctx.faulty.struckMessages > 0) ctx.facts.targetsStruck = ctx.faulty.struckMessages;
  if (ctx.faulty.injected === 0) {
    ctx.differences.push(
      "the kit's database fault never fired: the handler made no transaction through the database it was given (handler({ db }))",
    );
  }
}

/** Counts over every delivery of the good events. */
function deliveryFacts(ctx: ScenarioContext): void {
  const ids = new Set(idsOf(ctx.events));
  let deliveries = 0;
  let redelivered = 0;
  let retries = 0;
  for (const o of ctx.observer.observations) {
    if (!o.id || !ids.has(o.id)) continue;
    if (o.step === 'delivered') deliveries++;
    if (o.step === 'delivered' && o.detail?.includes('redelivered')) redelivered++;
    if (o.step === 'retry-scheduled') retries++;
  }
  ctx.facts.deliveries = deliveries;
  ctx.facts.redelivered = redelivered;
  ctx.facts.retries = retries;
}

const duplicates: Scenario = {
  name: 'duplicates',
  expectation: 'every event published twice is applied once',
  async run(ctx) {
    await ctx.start();
    // half the copies right behind the first (often the same batch), half once it was applied
    const [soon, late] = [every(ctx.events, 2), ctx.events.filter((_, i) => i % 2 === 1)];
    const copies = new Map<string, number>();
    const count = (outcomes: readonly PublishOutcome[]) => {
      for (const o of outcomes) {
        if (o.ok && !o.duplicate)
          copies.set(o.id.toLowerCase(), (copies.get(o.id.toLowerCase()) ?? 0) + 1);
      }
    };
    const firstAt = Date.now();
    count(await ctx.publish(ctx.events.flatMap((e) => (soon.includes(e) ? [e, e] : [e]))));
    await ctx.settledAll(idsOf(late));
    // where the broker deduplicates, the late copies go out past its window
    await ctx.waitUntil(
      "the broker's duplicate window to pass",
      () => Date.now() > firstAt + ctx.duplicateWindowMs,
    );
    count(await ctx.publish(late));
    await ctx.settledAll(ctx.accepted, (id) => copies.get(id) ?? 1);
    const dropped = ctx.events.length * 2 - [...copies.values()].reduce((a, b) => a + b, 0);
    ctx.facts.copiesPublished = ctx.events.length * 2;
    ctx.facts.copiesDroppedByBroker = dropped;
    deliveryFacts(ctx);
  },
};

/** Every other event's first transaction fails at its COMMIT, one way or the other. */
const commitFault = (
  name: ScenarioName,
  kind: 'commit-then-throw' | 'fail-at-commit',
  expectation: string,
): Scenario => ({
  name,
  expectation,
  async run(ctx) {
    ctx.faulty.fault = { kind, targets: new Set(idsOf(every(ctx.events, 2))) };
    await ctx.start();
    await ctx.publish(ctx.events);
    await ctx.settledAll(ctx.accepted);
    faultFired(ctx);
    deliveryFacts(ctx);
  },
});

const ackLost = commitFault(
  'ack-lost',
  'commit-then-throw',
  'a transaction that commits and then fails (the ack is lost) is redelivered and applied once',
);

const rollbackAfterEffect = commitFault(
  'rollback-after-effect',
  'fail-at-commit',
  "a transaction that fails at COMMIT (its work rolled back) is retried and applied once: an effect written outside the handler's transaction shows twice",
);

const poison: Scenario = {
  name: 'poison',
  expectation:
    'an unreadable body and an event of a type the handler does not handle are parked with a diagnosis; the good events are applied once',
  extraTypes: [UNHANDLED_TYPE],
  async run(ctx) {
    const unreadable = ctx.extraEvent(0);
    const unhandled = ctx.extraEvent(1, UNHANDLED_TYPE);
    const poisonIds = [unreadable.id.toLowerCase(), unhandled.id.toLowerCase()];
    ctx.label(poisonIds[0] as string, 'poison (unreadable body)');
    ctx.label(poisonIds[1] as string, `poison (type ${UNHANDLED_TYPE})`);
    // the transport carries a valid envelope; the handler gets the body unreadable
    await ctx.start({ corrupt: new Set([poisonIds[0] as string]) });
    const half = Math.ceil(ctx.events.length / 2);
    const published = await ctx.publish([
      ...ctx.events.slice(0, half),
      unreadable,
      unhandled,
      ...ctx.events.slice(half),
    ]);
    const poisonAccepted = poisonIds.filter((id) =>
      published.some((o) => o.ok && o.id.toLowerCase() === id),
    );
    await ctx.settledAll([...ctx.accepted, ...poisonAccepted]);
    const lot = await ctx.parked();
    let diagnosed = 0;
    for (const [k, id] of poisonIds.entries()) {
      const what = k === 0 ? 'the unreadable body' : `the event of type ${UNHANDLED_TYPE}`;
      const entry = lot.find((p) => p.diagnosis.messageId?.toLowerCase() === id);
      if (!entry) {
        const outcome = ctx.observer
          .of(id)
          .filter((o) => o.step === 'outcome')
          .map((o) => o.detail)
          .at(-1);
        ctx.differences.push(
          `${what} is not in the parking lot${outcome ? ` (the handler's last outcome: ${outcome})` : ''}`,
        );
        continue;
      }
      const d = entry.diagnosis;
      ctx.facts[k === 0 ? 'unreadableParked' : 'unhandledParked'] = `${d.reason}: ${d.error}`;
      if (d.reason && d.error) diagnosed++;
      else ctx.differences.push(`${what} is parked without a diagnosis (reason, error)`);
    }
    ctx.facts.poisonParkedWithDiagnosis = diagnosed;
    deliveryFacts(ctx);
  },
};

const dbOutageShort: Scenario = {
  name: 'db-outage-short',
  expectation: `with every transaction failing for ${SHORT_OUTAGE_MS / 1000} s, each event is retried and applied once, none parked`,
  async run(ctx) {
    await ctx.start();
    ctx.faulty.fault = { kind: 'outage' };
    ctx.observer.mark('database outage begins');
    const healed = new Promise<void>((resolve) =>
      setTimeout(() => {
        ctx.faulty.heal();
        ctx.observer.mark('database outage ends');
        resolve();
      }, SHORT_OUTAGE_MS),
    );
    await ctx.publish(ctx.events);
    await healed;
    await ctx.settledAll(ctx.accepted);
    faultFired(ctx);
    deliveryFacts(ctx);
  },
};

const dbOutageLong: Scenario = {
  name: 'db-outage-long',
  expectation:
    'with the database down past the retry budget, each event is parked `exhausted`; redriven once it is back, each is applied once',
  budget: SHORT_BUDGET,
  async run(ctx) {
    await ctx.start();
    ctx.faulty.fault = { kind: 'outage' };
    ctx.observer.mark('database outage begins');
    await ctx.publish(ctx.events);
    const ids = [...ctx.accepted];
    const parkedAll = await ctx.waitUntil(
      'every event parked',
      () =>
        ids.every((id) => ctx.observer.parks(id).length > 0) &&
        ids.every((id) => ctx.observer.settled(id) >= 1),
    );
    faultFired(ctx);
    const lot = await ctx.parked();
    const inLot = new Map(lot.map((p) => [p.diagnosis.messageId?.toLowerCase(), p.diagnosis]));
    const exhausted = ids.filter((id) => inLot.get(id)?.reason === 'exhausted');
    ctx.facts.parkedBeforeRedrive = ids.filter((id) => inLot.has(id)).length;
    ctx.facts.parkedExhausted = exhausted.length;
    if (parkedAll && exhausted.length < ids.length) {
      const other = ids
        .filter((id) => !exhausted.includes(id))
        .map((id) => inLot.get(id)?.reason ?? 'not in the parking lot');
      ctx.differences.push(
        `${ids.length - exhausted.length} of ${ids.length} events not parked \`exhausted\` before the redrive (${[...new Set(other)].join(', ')})`,
      );
    }
    ctx.faulty.heal();
    ctx.observer.mark('database outage ends');
    const moved = await ctx.redrive(ids.filter((id) => inLot.has(id)));
    ctx.facts.redriven = moved.length;
    ctx.observer.mark(`redrove ${moved.length} messages`);
    const parkAcks = (id: string) => ctx.observer.count(id, 'acked', (k) => k === 'park');
    await ctx.settledAll(ids, (id) => parkAcks(id) + 1);
    deliveryFacts(ctx);
  },
};

const redeliveryStorm: Scenario = {
  name: 'redelivery-storm',
  expectation: `every batch given back ${GIVE_BACKS} times (after the handler ran) is applied once, none parked`,
  async run(ctx) {
    const givenBack = new Map<string, number>();
    await ctx.start({
      giveBack: (ids) => {
        const known = ids.filter((id): id is string => id !== null);
        if (known.every((id) => (givenBack.get(id) ?? 0) >= GIVE_BACKS)) return undefined;
        for (const id of known) givenBack.set(id, (givenBack.get(id) ?? 0) + 1);
        return `give-back ${Math.max(...known.map((id) => givenBack.get(id) ?? 0))} of ${GIVE_BACKS}`;
      },
    });
    await ctx.publish(ctx.events);
    await ctx.settledAll(ctx.accepted);
    ctx.facts.givenBack = [...givenBack.values()].reduce((a, b) => a + b, 0);
    ctx.facts.fewestDeliveries = Math.min(
      ...[...ctx.accepted].map((id) => ctx.observer.deliveries(id)),
    );
    deliveryFacts(ctx);
  },
};

/** How many of `ids` consumer process `label` was delivered. */
const deliveredTo = (ctx: ScenarioContext, ids: Iterable<string | null>, label: string) =>
  [...ids].filter((id) =>
    ctx.observer.observations.some(
      (o) => o.id === id && o.process === label && o.step === 'delivered',
    ),
  ).length;

/** Why a scenario that runs consumer processes cannot run, if it cannot. */
const needsProcesses = (notShared: string | undefined, subjectModule: string | undefined) =>
  notShared ??
  (subjectModule
    ? undefined
    : 'the subject was given as an object: a consumer process imports it by its module path');

/**
 * Starts consumer process `child 1` (its ack held back 400 ms after the handler) and, the moment
 * it has committed a batch, does `act` to it while it holds that batch unacknowledged. Returns the
 * child, when it acted (undefined: the scenario's time ran out first) and the ids it has committed
 * so far (read when asked: a killed child's last lines arrive once it has exited).
 */
async function atFirstCommit(
  ctx: ScenarioContext,
  options: { leased?: boolean; what: string },
  act: (child: ChildWorker) => void,
): Promise<{ child: ChildWorker; at: number | undefined; committed: () => Set<string | null> }> {
  const child = await ctx.startChild({
    label: 'child 1',
    pauseAfterHandlerMs: 400,
    ...(options.leased ? { leased: true } : {}),
  });
  const acks = () =>
    ctx.observer.observations.filter(
      (o) => o.process === 'child 1' && o.step === 'outcome' && o.kind === 'ack',
    );
  let at: number | undefined;
  await ctx.waitUntil('the first process to commit a batch', () => {
    const committed = acks().length > 0;
    if (committed && at === undefined) {
      act(child);
      at = Date.now();
      ctx.observer.mark(`child 1 ${options.what}`);
    }
    return committed;
  });
  return { child, at, committed: () => new Set(acks().map((o) => o.id)) };
}

const killedProcess: Scenario = {
  name: 'killed-process',
  expectation:
    'a consumer process SIGKILLed between its COMMIT and its ack, then started again: every event applied once',
  notApplicable: ({ notShared, subjectModule }) => needsProcesses(notShared, subjectModule),
  async run(ctx) {
    await ctx.publish(ctx.events);
    // the first batch committed: kill while the child holds it unacknowledged
    const first = await atFirstCommit(ctx, { what: 'SIGKILLed' }, (child) => child.kill());
    await first.child.exited;
    if (first.at === undefined) return;
    const inFirst = first.committed();
    const second = await ctx.startChild({ label: 'child 2', pauseAfterHandlerMs: 0 });
    ctx.observer.mark('child 2 started');
    await ctx.settledAll(ctx.accepted);
    await second.stop();
    ctx.facts.committedBeforeKill = inFirst.size;
    ctx.facts.redeliveredToSecond = deliveredTo(ctx, inFirst, 'child 2');
    deliveryFacts(ctx);
  },
};

/** How long past its lease a frozen process stays frozen once another took its messages over. */
const FROZEN_EXTRA_MS = 500;

const frozenProcess: Scenario = {
  name: 'frozen-process',
  expectation:
    'a consumer process frozen (SIGSTOP) between its COMMIT and its ack, past its lease, while a second process takes its messages over, then resumed (SIGCONT): every event applied once',
  notApplicable: ({ notShared, subjectModule, lease }) =>
    needsProcesses(notShared, subjectModule) ??
    (lease
      ? undefined
      : 'the kit sets no lease this transport would take a frozen consumer’s messages back after'),
  async run(ctx) {
    const lease = ctx.lease as KitLease;
    ctx.facts.lease = lease.text;
    await ctx.publish(ctx.events);
    const first = await atFirstCommit(
      ctx,
      { leased: true, what: 'frozen (SIGSTOP) before its ack' },
      (child) => child.freeze(),
    );
    if (first.at === undefined) {
      await first.child.stop();
      return;
    }
    const frozenAt = first.at;
    const held = first.committed();
    const second = await ctx.startChild({ label: 'child 2', pauseAfterHandlerMs: 0 });
    ctx.observer.mark('child 2 started');
    const takenOver = await ctx.waitUntil('child 2 to receive a message child 1 holds', () =>
      ctx.observer.observations.some(
        (o) => o.process === 'child 2' && o.step === 'delivered' && held.has(o.id),
      ),
    );
    if (takenOver) {
      ctx.facts.takenOverAfterMs = Date.now() - frozenAt;
      await ctx.waitUntil('child 1 to stay frozen a while longer', () => {
        const since = ctx.observer.observations.find(
          (o) => o.process === 'child 2' && o.step === 'delivered' && held.has(o.id),
        );
        return since !== undefined && Date.now() >= since.at + FROZEN_EXTRA_MS;
      });
    }
    first.child.thaw();
    ctx.observer.mark('child 1 resumed (SIGCONT)');
    await ctx.settledAll(ctx.accepted);
    await second.stop();
    await first.child.stop();
    ctx.facts.committedBeforeFreeze = held.size;
    ctx.facts.takenOverBySecond = deliveredTo(ctx, held, 'child 2');
    deliveryFacts(ctx);
  },
};

const slowPastLease: Scenario = {
  name: 'slow-past-lease',
  expectation:
    'a handler slower than its lease while a second consumer takes the same message: both run it at once, it is applied once',
  notApplicable: ({ lease }) =>
    lease?.on === 'delivery'
      ? undefined
      : lease
        ? 'a delivery stays with its consumer as long as its connection lives: a slow handler keeps it (RabbitMQ’s consumer timeout, 30 minutes by default, is no lease the kit can make short on every version)'
        : 'the kit sets no lease on a delivery for this transport',
  async run(ctx) {
    const lease = ctx.lease as KitLease;
    ctx.facts.lease = lease.text;
    // every other event's first delivery waits past the lease before the handler runs
    const targets = new Set(idsOf(every(ctx.events, 2)));
    const slowed = new Set<string>();
    const slowMs = Math.round(lease.ms * 1.5);
    const instrumentation = {
      beforeHandler: async (ids: readonly (string | null)[]) => {
        const fresh = ids.filter((id): id is string => !!id && targets.has(id) && !slowed.has(id));
        if (fresh.length === 0) return undefined;
        for (const id of fresh) slowed.add(id);
        await new Promise((resolve) => setTimeout(resolve, slowMs));
        return `held ${slowMs} ms before the handler, past ${lease.text}`;
      },
    };
    await ctx.start(instrumentation);
    await ctx.start(instrumentation);
    await ctx.publish(ctx.events);
    await ctx.settledAll(ctx.accepted);
    // the held deliveries ran the handler too (after the other consumer applied the event)
    const ranAfterHold = (id: string) => {
      const seen = ctx.observer.of(id);
      const held = seen.findIndex((o) => o.step === 'slowed');
      return held >= 0 && seen.slice(held).some((o) => o.step === 'outcome');
    };
    await ctx.waitUntil('every held delivery to run the handler', () =>
      [...slowed].every(ranAfterHold),
    );
    await ctx.settledAll(ctx.accepted);
    ctx.facts.slowed = slowed.size;
    // a slowed message delivered again while its first delivery was held (`slowed` is recorded
    // when the hold ends)
    ctx.facts.deliveredAgainWhileHeld = [...slowed].filter((id) => {
      const seen = ctx.observer.of(id);
      const firstAt = seen.find((o) => o.step === 'delivered')?.at;
      const heldUntil = seen.find((o) => o.step === 'slowed')?.at;
      return (
        firstAt !== undefined &&
        heldUntil !== undefined &&
        seen.some((o) => o.step === 'delivered' && o.at > firstAt && o.at <= heldUntil)
      );
    }).length;
    deliveryFacts(ctx);
  },
};

/** A fixed shuffle (the same order on every run). */
function shuffled<T>(list: readonly T[]): T[] {
  const out = [...list];
  let seed = 0x2f6b_3a91;
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

const reordering: Scenario = {
  name: 'reordering',
  expectation:
    'events published out of their order are all applied once (the order they are applied in is reported: it is the subject’s own policy)',
  async run(ctx) {
    await ctx.start();
    const order = shuffled(ctx.events);
    await ctx.publish(order);
    await ctx.settledAll(ctx.accepted);
    const index = new Map(ctx.events.map((e, i) => [e.id.toLowerCase(), i]));
    const applied = ctx.observer.observations
      .filter((o) => o.step === 'outcome' && o.kind === 'ack' && !o.detail?.includes('duplicate'))
      .map((o) => index.get(o.id ?? ''))
      .filter((i): i is number => i !== undefined);
    ctx.facts.publishedOrder = order.map((e) => index.get(e.id.toLowerCase())).join(' ');
    ctx.facts.appliedOrder = [...new Set(applied)].join(' ');
    ctx.facts.deferred = ctx.observer.observations.filter(
      (o) => o.step === 'outcome' && o.detail?.includes('(deferred'),
    ).length;
    deliveryFacts(ctx);
  },
};

/** Every scenario by name. */
export const SCENARIOS: Record<ScenarioName, Scenario> = {
  duplicates,
  'ack-lost': ackLost,
  'rollback-after-effect': rollbackAfterEffect,
  poison,
  'db-outage-short': dbOutageShort,
  'db-outage-long': dbOutageLong,
  'redelivery-storm': redeliveryStorm,
  'killed-process': killedProcess,
  'frozen-process': frozenProcess,
  'slow-past-lease': slowPastLease,
  reordering,
};
