import { type ConsumerSettings, startConsumer } from '../../devkit/consumers.js';
import { ReservationFailures } from '../../devkit/dbControls.js';
import { startHttpApi } from '../../devkit/emulators/httpApi.js';
import type { SqsFaultLayer } from '../../devkit/emulators/sqsFaults.js';
import { type JournalLine, JournalRecorder } from '../../devkit/journalRecorder.js';
import { type RunningEventSource, startSchedule } from '../../devkit/lambda/eventSources.js';
import type { LocalPipeline } from '../../devkit/lambda/localPipeline.js';
import { publishRaw, type RawMessage } from '../../devkit/rawMessages.js';
import { proxiedDatabase, type ScratchEnvironment } from '../../devkit/scratch.js';
import type { TcpProxy } from '../../devkit/TcpProxy.js';
import { localTransport } from '../../devkit/transports/index.js';
import { waitFor } from '../../devkit/waitFor.js';
import { createPlaceOrderHandler } from '../../functions/place-order/handler.js';
import {
  ensurePeerSchema,
  parseOrderCreated,
  reserveEffect,
  reserveEffectIn,
} from '../../peers/effect.js';
import type { PeerDelivery } from '../../peers/types.js';
import { DEFAULT_RETENTION, type RetryBudget } from '../../shared/config/budget.js';
import { FaultScope, fault } from '../../shared/config/faults.js';
import { Journal } from '../../shared/consumer/journal.js';
import type { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type { SqlDatabase } from '../../shared/db/types.js';
import type { Envelope } from '../../shared/envelope/envelope.js';
import { INVENTORY_PARK_NOTICES } from '../../shared/inventory/quarantine.js';
import { ReserveInventory } from '../../shared/inventory/ReserveInventory.js';
import { setStock } from '../../shared/inventory/stock.js';
import { createLogger } from '../../shared/logger.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { type DrainResult, OutboxRelay } from '../../shared/outbox/OutboxRelay.js';
import { OutboxStore } from '../../shared/outbox/OutboxStore.js';
import type { Backend, ParkingLot, Publisher } from '../../shared/port/types.js';
import type { BackendBase } from '../../shared/transport/index.js';
import { sleep } from '../../shared/util/async.js';
import type { LabChildSpec } from '../child.js';
import type { Configuration } from '../configurations.js';
import type { LabServices, LabSettings } from '../settings.js';
import type { ParkedSummary, TimelineKind } from '../types.js';
import { PeerSide, REDIS_URL } from './peer.js';
import { LabProcess } from './processes.js';

export interface RigOptions {
  /** Overrides of the retry budget for this scenario (e.g. `maxAttempts: 0`: park at once). */
  budget?: Partial<RetryBudget>;
}

/** An event the producer side accepted (Jepsen: an acknowledged write). */
export interface AcceptedEvent {
  eventId: string;
  type: string;
  /** The order it belongs to (the ordering key). */
  aggregateId: string;
  version: number;
  at: number;
}

/** What a child process connects through instead of the run's own endpoints. */
export interface ChildOverrides {
  /** Settings of the child's backend over the run's (a proxy's URL, a short heartbeat). */
  backend?: Record<string, unknown>;
  databaseUrl?: string;
}

/** The lease a frozen consumer process outlives, and what its child is given for it. */
export interface ConsumerLease {
  child: ChildOverrides;
  /** In words, for the report (`its visibility timeout (6 s)`). */
  text: string;
  ms: number;
}

/** A child's broker connection through a proxy the scenario controls (cut, hold the answers). */
export interface ProxiedBroker {
  child: ChildOverrides;
  proxy: TcpProxy;
}

/** Part of the next publish round made to fail (`publish-partially-failed`). */
export interface PartialPublish {
  /** The publisher the round goes through (default: the rig's). */
  publisher?: Publisher | undefined;
  /** The mark on the timeline. */
  mark: string;
  /** Makes the failed part publishable again. */
  restore(): Promise<void>;
  /** One line on what the broker answered the round, for the note. */
  note(round: { published: number; failed: number; claimed: number }): string;
}

/** How the peer libraries reach this run's broker. */
export interface PeerBroker {
  sqs?: { client: import('@aws-sdk/client-sqs').SQSClient; endpoint: string; region: string };
  amqpUrl?: string;
}

/** The lab's relay: a small row backoff, so a fixed route is seen quickly. */
const RELAY_OPTIONS = {
  batchSize: 100,
  maxAttempts: 10,
  retryBaseMs: 100,
  retryMaxMs: 400,
  readyTimeoutMs: 300,
};

export interface Mark {
  at: number;
  kind: TimelineKind;
  label: string;
}

export interface ConsumerOptions {
  /** The database the consumer uses (default: the run's own, direct). */
  db?: SqlDatabase;
  /** Consumers (worker channels) or invocations at once (SQS trigger). */
  concurrency?: number;
}

/** Created on first use, so the entry point's POWERTOOLS_LOG_LEVEL applies (imports run first). */
let labLogger: ReturnType<typeof createLogger> | undefined;
export const log = () => {
  labLogger ??= createLogger('lab');
  return labLogger;
};

/**
 * Everything one scenario run needs on one configuration, all of its own: a scratch environment
 * (database, virtual host or queue prefix) and the backend on it, the HTTP API, the relay, the
 * consumer (worker or trigger emulation), a journal that records every consumer step with its
 * time, a fault scope, and controls (cut the database, cut the broker, remove a route or the
 * parking lot). Transport-neutral: the backend is built and the broker controls are written once
 * per transport (`rabbitmq.ts`, `sqs.ts`); `createRig` (index.ts) picks one.
 */
export abstract class Rig {
  readonly recorder = new JournalRecorder();
  readonly faults = new FaultScope();
  readonly marks: Mark[] = [];
  readonly budget: RetryBudget;
  readonly failures: ReservationFailures;
  /** What a scenario observed on the way (relay round results, errors read back), for its checks. */
  readonly facts: Record<string, unknown> = {};
  /** When the scenario started (its setup excluded). */
  t0 = Date.now();
  /**
   * Every event the producer side accepted (the API answered 2xx, or the scenario published it as
   * the relay would), by event id: what Jepsen's accounting counts as acknowledged writes.
   */
  readonly accepted = new Map<string, AcceptedEvent>();
  /**
   * Events whose publish was uncertain at least once (the relay died or lost the answer after
   * sending them): one that arrives anyway is `recovered` in the accounting.
   */
  readonly uncertain = new Set<string>();
  /** When the scenario's fault ended (the last `faultEnded`), for the time to recover. */
  faultEndedAt: number | undefined;
  /** The run's backend (built, not connected: `prepare` connects and declares). */
  abstract readonly backend: Backend;
  protected readonly closers: (() => Promise<unknown>)[] = [];
  private apiUrl: string | undefined;
  /**
   * The deployed bundles this run's consumer and relay run from (`--bundles`), with the relay's
   * schedule once started; undefined when they run from the sources.
   */
  private bundles: { pipeline: LocalPipeline; relay?: RunningEventSource } | undefined;
  /** A peer configuration's consumer (started by `startConsumer`). */
  private peerSide: PeerSide | undefined;
  /** The URL of each proxied pool (a peer that opens its own pool goes through the same proxy). */
  private readonly proxiedUrls = new WeakMap<SqlDatabase, string>();
  /** Peer handler calls in progress (a delivery being handled is not settled). */
  private peerInFlight = 0;
  /** The run's child processes (consumers and relays), in start order. */
  readonly processes: LabProcess[] = [];

  protected constructor(
    readonly configuration: Configuration,
    readonly settings: LabSettings,
    readonly services: LabServices,
    readonly scratch: ScratchEnvironment,
    options: RigOptions,
  ) {
    this.budget = { ...settings.budget, ...options.budget };
    this.failures = new ReservationFailures(scratch.database.db);
  }

  /** What every backend of this run is configured with (the run's budget, its consumer name). */
  protected get backendBase(): BackendBase {
    return {
      budget: this.budget,
      retention: DEFAULT_RETENTION,
      consumer: `inventory@lab-${this.configuration.id}`,
      logger: log(),
    };
  }

  /**
   * The backend configuration a child process (lab/child.ts) builds its own backend from: this
   * run's, without its logger, and the child's own settings.
   */
  protected abstract childBackend(): Record<string, unknown>;

  /** The SQS fault layer every client of the run goes through (SQS runs only). */
  readonly sqsFaults?: SqsFaultLayer | undefined;

  /** How a frozen consumer process loses its deliveries: the lease, and its child's settings. */
  abstract consumerLease(): ConsumerLease;

  /**
   * A broker connection for a child process through a proxy the scenario controls, where the
   * broker is reached over one connection (undefined: SQS, whose faults the fault layer makes).
   */
  async proxiedBroker(): Promise<ProxiedBroker | undefined> {
    return undefined;
  }

  /** Part of the next publish round fails; undefined where the broker cannot be made to. */
  async failPartOfNextPublish(): Promise<PartialPublish | undefined> {
    return undefined;
  }

  /** How a redrive moves a parked message back, in a few words (the parking notes). */
  abstract readonly redriveMechanism: string;

  /** How the peer libraries reach this run's broker. */
  abstract peerBroker(): PeerBroker;

  /** The SQS endpoint this run's clients use (the fault layer's, on SQS). */
  get sqsEndpoint(): string {
    return this.services.sqsEndpoint;
  }

  private childSpec(
    role: LabChildSpec['role'],
    overrides: ChildOverrides,
  ): Omit<LabChildSpec, 'consumer' | 'relay'> {
    return {
      role,
      transport: this.configuration.transport,
      databaseUrl: overrides.databaseUrl ?? this.scratch.database.url,
      backend: {
        ...this.childBackend(),
        ...overrides.backend,
        budget: this.budget,
      } as LabChildSpec['backend'],
    };
  }

  private trackProcess(proc: LabProcess): LabProcess {
    this.processes.push(proc);
    this.closers.push(() => proc.stop());
    return proc;
  }

  /** The events of a child process, into the run's journal and timeline. */
  private processEvents(name: string) {
    return {
      journal: (entry: Parameters<Journal['record']>[0]) => this.journal.record(entry),
      event: (event: string, fields: Record<string, unknown>) => {
        if (event === 'invocation-failed') {
          const { invocationFailed } = this.consumerSettings();
          this.mark(`${name}: ${invocationFailed}: ${String(fields.error)}`, 'failed-invocation');
        } else if (event === 'round-failed') {
          this.mark(`${name}: relay round failed: ${String(fields.error)}`);
        }
      },
    };
  }

  /**
   * The configuration's consumer in a process of its own (lab/child.ts), ready when this
   * resolves; a scenario may kill, pause and resume it. Stopped with the rig.
   */
  async startConsumerProcess(
    name: string,
    options: ChildOverrides & { concurrency?: number } = {},
  ): Promise<LabProcess> {
    if (this.configuration.peer) throw new Error('the peers run in the lab process only');
    const { invocationFailed: _, ...specific } = this.consumerSettings();
    const spec: LabChildSpec = {
      ...this.childSpec('consumer', options),
      consumer: {
        mode: this.configuration.consumer === 'worker' ? 'worker' : 'lambda',
        ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
        batchSize: 10,
        functionTimeoutMs: this.settings.functionTimeoutMs,
        reconnectBaseMs: 100,
        reconnectMaxMs: 1_000,
        ...specific,
      },
    };
    const proc = this.trackProcess(new LabProcess(name, spec, this.processEvents(name)));
    await proc.waitReady();
    return proc;
  }

  /** The outbox relay in a process of its own, draining without pause; stopped with the rig. */
  async startRelayProcess(name: string, options: ChildOverrides = {}): Promise<LabProcess> {
    const spec: LabChildSpec = {
      ...this.childSpec('relay', options),
      relay: RELAY_OPTIONS,
    };
    const proc = this.trackProcess(new LabProcess(name, spec, this.processEvents(name)));
    await proc.waitReady();
    return proc;
  }

  /** Creates the transport's resources (called once, inside the rig's fault scope). */
  async prepare(): Promise<void> {
    await this.backend.prepare();
    // a peer's handler writes its effects beside ours (peers/effect.ts)
    if (this.configuration.peer) await ensurePeerSchema(this.db);
  }

  /**
   * Runs the consumer and the relay from these deployed bundles (deployed already: migrations and
   * broker topology applied, the local identities created); closed with the rig.
   */
  useBundles(pipeline: LocalPipeline): void {
    const bundles: { pipeline: LocalPipeline; relay?: RunningEventSource } = { pipeline };
    this.bundles = bundles;
    this.closers.push(async () => {
      // the functions first: a relay invocation in flight (it drains for 50 s) ends at once
      await pipeline.close();
      await bundles.relay?.stop();
    });
  }

  /** The relay bundle on its schedule rule (from the template), when running from the bundles. */
  startRelaySchedule(): void {
    if (!this.bundles || this.bundles.relay) return;
    const relay = startSchedule(this.bundles.pipeline.deployment, 'outbox-relay', {
      logger: log(),
    });
    this.bundles.relay = relay;
  }

  get db(): PgDatabase {
    return this.scratch.database.db;
  }

  get journal() {
    return this.recorder.journal;
  }

  /** The scenario's clock starts now (call after setup). */
  begin(): void {
    this.t0 = Date.now();
  }

  mark(label: string, kind: TimelineKind = 'control'): void {
    this.marks.push({ at: Date.now(), kind, label });
  }

  /** The fault is over (marked on the timeline): the accounting's time to recover starts here. */
  faultEnded(label: string, at = Date.now()): void {
    this.faultEndedAt = at;
    this.marks.push({ at, kind: 'control', label });
  }

  /** Records events whose publish was uncertain (see `uncertain`). */
  markUncertain(eventIds: Iterable<string>): void {
    for (const id of eventIds) this.uncertain.add(id);
  }

  /** Records an event the producer side accepted (see `accepted`). */
  accept(e: Pick<Envelope, 'id' | 'type' | 'aggregate'>): void {
    this.accepted.set(e.id, {
      eventId: e.id,
      type: e.type,
      aggregateId: e.aggregate.id,
      version: e.aggregate.version,
      at: Date.now(),
    });
  }

  /** Waits on a condition, for at most the run's wait budget. */
  waitFor<T>(
    check: () => Promise<T> | T,
    message: string,
    options: { timeoutMs?: number; intervalMs?: number } = {},
  ) {
    return waitFor(check, {
      timeoutMs: options.timeoutMs ?? this.settings.waitMs,
      intervalMs: options.intervalMs ?? 25,
      message,
    });
  }

  /**
   * Watches a condition for at most `forMs`: true as soon as it holds, false if it never did. For
   * stimuli that last a given time where one transport reacts and another does not.
   */
  async observe(check: () => Promise<boolean> | boolean, forMs: number): Promise<boolean> {
    const until = Date.now() + forMs;
    while (Date.now() < until) {
      if (await check()) return true;
      await sleep(25);
    }
    return check();
  }

  /** Journal lines of one message (optionally one step), since the scenario's start. */
  linesOf(messageId: string, step?: JournalLine['step']): JournalLine[] {
    return this.recorder.lines.filter(
      (l) => l.messageId === messageId && (!step || l.step === step) && l.at >= this.t0,
    );
  }

  waitForLine(
    messageId: string,
    step: Parameters<JournalRecorder['waitForLine']>[1],
    count = 1,
    timeoutMs = this.settings.waitMs,
  ) {
    return this.recorder.waitForLine(messageId, step, count, timeoutMs);
  }

  stock(sku: string, available: number) {
    return setStock(this.db, sku, available);
  }

  /**
   * The orders HTTP API (place-order handler behind the local API Gateway emulation; from the
   * bundles, the place-order bundle behind the template's routes).
   */
  private async api(): Promise<string> {
    if (this.apiUrl) return this.apiUrl;
    if (this.bundles) {
      // as deployed: the place-order bundle behind its routes, kicking the relay after COMMIT
      const deployed = await this.bundles.pipeline.deployment.startHttpApi();
      this.apiUrl = deployed.url;
      return deployed.url;
    }
    const api = await startHttpApi(
      createPlaceOrderHandler({ orders: new OrderService({ db: this.db }), logger: log() }),
      { port: 0 },
    );
    this.closers.push(() => api.close());
    this.apiUrl = api.url;
    return api.url;
  }

  private async post(path: string, body?: unknown): Promise<Record<string, unknown>> {
    const res = await fetch(`${await this.api()}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-correlation-id': `lab-${this.name}` },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await res.json()) as Record<string, unknown>;
    if (res.status >= 300) throw new Error(`POST ${path} → ${res.status} ${JSON.stringify(json)}`);
    return json;
  }

  /** `POST /orders`: the order row and its outbox row in one COMMIT. */
  async placeOrder(sku: string, quantity: number): Promise<{ orderId: string; eventId: string }> {
    const r = await this.post('/orders', { sku, quantity });
    const placed = { orderId: r.orderId as string, eventId: r.eventId as string };
    this.accept({
      id: placed.eventId,
      type: 'order.created',
      aggregate: { type: 'order', id: placed.orderId, version: 1 },
    });
    return placed;
  }

  /** `POST /orders/{id}/cancel`: `order.cancelled`, version 2. */
  async cancelOrder(orderId: string): Promise<{ eventId: string }> {
    const r = await this.post(`/orders/${orderId}/cancel`);
    if (typeof r.eventId === 'string')
      this.accept({
        id: r.eventId as string,
        type: 'order.cancelled',
        aggregate: { type: 'order', id: orderId, version: 2 },
      });
    return { eventId: r.eventId as string };
  }

  /** The unpublished envelopes in the outbox (oldest first), as the relay will publish them. */
  outboxEnvelopes(): Promise<Envelope[]> {
    return this.db.transaction(async (tx) =>
      (await new OutboxStore('outbox').claim(tx, 100_000)).map((r) => r.envelope),
    );
  }

  async unpublished(): Promise<number> {
    const { rows } = await this.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL',
    );
    return rows[0]?.n ?? 0;
  }

  /** The outbox relay on this transport (small row backoff, so a fixed route is seen quickly). */
  relay(publisher: Publisher = this.publisher()): OutboxRelay {
    return new OutboxRelay(
      { db: this.db, publisher, logger: log() },
      { table: 'outbox', ...RELAY_OPTIONS },
    );
  }

  /** Runs the relay until the outbox is empty. */
  async drainOutbox(publisher?: Publisher): Promise<void> {
    if (this.bundles) {
      // the deployed relay drains on its schedule: wait for it
      await this.waitFor(async () => (await this.unpublished()) === 0, 'outbox drained');
      return;
    }
    const loop = this.relayLoop(this.relay(publisher));
    try {
      await this.waitFor(async () => (await this.unpublished()) === 0, 'outbox drained');
    } finally {
      await loop.stop();
    }
  }

  /**
   * Runs `relay` without pause (rounds 25 ms apart when idle) for at most `budgetMs` (default the
   * run's wait budget), until `stop`, which resolves with what it did once the round in flight ends.
   */
  relayLoop(
    relay: OutboxRelay = this.relay(),
    budgetMs = this.settings.waitMs,
  ): { stop(): Promise<DrainResult> } {
    const abort = new AbortController();
    const draining = relay.drain({ budgetMs, idleWaitMs: 25, signal: abort.signal });
    return {
      stop: () => {
        abort.abort();
        return draining;
      },
    };
  }

  /** The publisher the relay uses: order events to the consumer's queue. */
  /**
   * Copies the broker dropped as duplicates of a message it held (its deduplication window), by
   * event id: they never reach the consumer, so nobody waits for them.
   */
  readonly droppedCopies = new Map<string, number>();

  publisher(): Publisher {
    if (this.configuration.peer) return this.peer().publisher();
    const publisher = this.backend.publisher('outbox');
    return {
      publish: async (envelopes) => {
        const outcomes = await publisher.publish(envelopes);
        for (const o of outcomes) {
          if (o.ok && o.duplicate)
            this.droppedCopies.set(o.id, (this.droppedCopies.get(o.id) ?? 0) + 1);
        }
        return outcomes;
      },
      ready: (timeoutMs) => publisher.ready(timeoutMs),
      close: () => publisher.close(),
      ...(publisher.takeRouteLosses
        ? { takeRouteLosses: () => publisher.takeRouteLosses?.() ?? [] }
        : {}),
      ...(publisher.returnRouteLosses
        ? { returnRouteLosses: (losses) => publisher.returnRouteLosses?.(losses) }
        : {}),
    };
  }

  private peer(): PeerSide {
    if (!this.peerSide) throw new Error(`${this.configuration.id}: start the consumer first`);
    return this.peerSide;
  }

  /** Publishes envelopes as the relay does (confirmed); throws if one is not confirmed. */
  async publish(...envelopes: Envelope[]): Promise<void> {
    for (const e of envelopes) if (!this.accepted.has(e.id)) this.accept(e);
    const outcomes = await this.publisher().publish(envelopes);
    const failed = outcomes.find((o) => !o.ok);
    if (failed && !failed.ok) throw new Error(`publish failed: ${failed.reason} ${failed.error}`);
  }

  /** Puts messages on the transport as they are (poison messages). */
  publishRaw(messages: RawMessage[]): Promise<void> {
    if (this.configuration.peer) return this.peer().send(messages);
    return publishRaw(this.backend, messages);
  }

  useCase(db: SqlDatabase = this.db): ReserveInventory {
    return new ReserveInventory(
      { db, journal: this.journal, logger: log() },
      { budget: this.budget },
    );
  }

  /**
   * Consumer settings of this transport beyond the common ones, and what a failed invocation of
   * its Lambda trigger means (the label of the `failed-invocation` mark).
   */
  protected abstract consumerSettings(): Partial<ConsumerSettings> & { invocationFailed: string };

  /**
   * Starts the configuration's consumer of the inventory queue around the use case: the worker,
   * or the reserve function behind its Lambda trigger's emulation (a failed invocation is marked
   * on the timeline).
   */
  async startConsumer(options: ConsumerOptions = {}): Promise<void> {
    if (this.configuration.peer) return this.startPeer(options);
    if (this.bundles && this.configuration.consumer !== 'worker') {
      // the reserve bundle behind its event source mapping, all settings from the template
      const { invocationFailed } = this.consumerSettings();
      const d = this.bundles.pipeline.deployment;
      const onInvocationError = (err: Error) =>
        this.mark(`${invocationFailed}: ${err.message}`, 'failed-invocation');
      const deployed = localTransport(this.configuration.transport).deployed;
      if (!deployed) throw new Error(`--bundles: nothing deploys ${this.configuration.transport}`);
      const source = await deployed.startEventSource(d, deployed.functions.inventory, {
        amqpUrl: this.services.amqpUrl,
        vhost: this.scratch.vhost?.vhost,
        logger: log(),
        onInvocationError,
      });
      this.closers.push(() => source.stop());
      return;
    }
    const useCase = this.useCase(options.db);
    const { invocationFailed, ...specific } = this.consumerSettings();
    const consumer = await startConsumer(this.backend, (m) => useCase.process(m), {
      mode: this.configuration.consumer === 'worker' ? 'worker' : 'lambda',
      journal: this.journal,
      // parked order events are announced on the results queue, as deployed (nothing in the lab
      // reads that queue: the accounting counts inventory's inbox and parking lot only)
      notices: INVENTORY_PARK_NOTICES,
      logger: log(),
      ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
      batchSize: 10,
      functionTimeoutMs: this.settings.functionTimeoutMs,
      reconnectBaseMs: 100,
      reconnectMaxMs: 1_000,
      ...specific,
      onInvocationError: (err) =>
        this.mark(`${invocationFailed}: ${err.message}`, 'failed-invocation'),
    });
    this.closers.push(() => consumer.stop());
  }

  /**
   * A peer configuration's consumer: the peer library on the run's namespace (its own queues and
   * stores), running the handler its user would write (peers/effect.ts) on the run's database
   * (or the given one). The fault point `reserve.after-commit` fires after the handler's COMMIT,
   * as it does in ours; a peer that runs the effect in its own transaction (its inbox) meets it
   * before that transaction commits.
   */
  private async startPeer(options: ConsumerOptions): Promise<void> {
    const id = this.configuration.peer as NonNullable<Configuration['peer']>;
    const broker = this.peerBroker();
    const side = new PeerSide(id, {
      db: this.db,
      ...(broker.sqs ? { sqs: broker.sqs.client } : {}),
      ...(broker.amqpUrl ? { amqpUrl: broker.amqpUrl } : {}),
    });
    this.peerSide = side;
    this.closers.push(() => side.close());
    const db = (options.db ?? this.db) as PgDatabase;
    const journal = new Journal();
    journal.addSink((e) => this.journal.record(e));
    const committed = (delivery: PeerDelivery) =>
      this.journal.record({
        step: 'effect-committed',
        messageId: delivery.messageId,
        eventType: 'order.created',
        attempt: delivery.attempt,
        redelivered: delivery.attempt > 1,
      });
    const tracked = async <T>(fn: () => Promise<T>): Promise<T> => {
      this.peerInFlight++;
      try {
        return await fn();
      } finally {
        this.peerInFlight--;
      }
    };
    await side.start({
      namespace: `${this.scratch.sqsPrefix}${id.replace('peer-', '')}-`,
      db,
      databaseUrl: (options.db && this.proxiedUrls.get(options.db)) ?? this.scratch.database.url,
      ...(broker.sqs ? { sqs: broker.sqs } : {}),
      ...(broker.amqpUrl ? { amqpUrl: broker.amqpUrl } : {}),
      redisUrl: REDIS_URL,
      concurrency: options.concurrency ?? 1,
      batchSize: 10,
      maxDeliveries: this.budget.maxAttempts + 1,
      visibilityTimeoutSeconds: this.settings.visibilityTimeoutSeconds,
      functionTimeoutMs: this.settings.functionTimeoutMs,
      journal,
      handle: (body, delivery) =>
        tracked(async () => {
          await reserveEffect(db, id, parseOrderCreated(body));
          committed(delivery);
          fault('reserve.after-commit');
        }),
      handleIn: (client, body, delivery) =>
        tracked(async () => {
          await reserveEffectIn(client, id, parseOrderCreated(body));
          fault('reserve.after-commit');
          // committed with the peer's own transaction: journaled as the handler returns
          committed(delivery);
        }),
    });
  }

  /**
   * True when a peer's queue holds nothing (visible, in flight or delayed) and no handler is
   * running: every delivery settled one way or another. Always true for our configurations.
   */
  async peerIdle(): Promise<boolean> {
    if (!this.peerSide) return true;
    return this.peerInFlight === 0 && (await this.peerSide.pending()) === 0;
  }

  /**
   * Waits until these events are settled: ours, each acknowledged `copies` times (journal
   * `acked`); a peer's, each committed or parked and its queue idle (twice in a row, 100 ms apart:
   * a copy being moved between queues is briefly in neither).
   */
  async waitSettled(eventIds: string[], copies = 1): Promise<void> {
    if (!this.configuration.peer) {
      for (const id of eventIds) {
        const delivered = Math.max(1, copies - (this.droppedCopies.get(id) ?? 0));
        await this.waitForLine(id, 'acked', delivered);
      }
      return;
    }
    let streak = 0;
    await this.waitFor(
      async () => {
        const parkedList = await this.parked();
        const parked = new Set(parkedList.map((p) => p.messageId));
        const open = eventIds.filter(
          (id) => this.linesOf(id, 'effect-committed').length === 0 && !parked.has(id),
        );
        // a peer may park a copy without the id we know it by (a body that is not JSON, moved
        // without its attributes): count those against the events still open
        const unnamed = parkedList.filter((p) => !p.messageId || !eventIds.includes(p.messageId));
        const done = open.length <= unnamed.length;
        streak = done && (await this.peerIdle()) ? streak + 1 : 0;
        return streak >= 2;
      },
      `${eventIds.length} event(s) settled by ${this.configuration.id}`,
      { intervalMs: 100 },
    );
  }

  /** What is parked: our parking lot with its diagnoses, or a peer's dead-letter queue. */
  async parked(limit = 500): Promise<ParkedSummary[]> {
    if (this.configuration.peer) return this.peerSide ? this.peerSide.parked(limit) : [];
    return (await this.parkingLot().list(limit)).map((p) => ({
      messageId: p.diagnosis.messageId,
      reason: p.diagnosis.reason,
      errorClass: p.diagnosis.errorClass,
      error: p.diagnosis.error,
      via: p.via,
      attempts: p.diagnosis.attempts,
    }));
  }

  parkingLot(): ParkingLot {
    return this.backend.parkingLot();
  }

  /** Removes the route to the consumer's queue (RabbitMQ: bindings; SQS: the queue itself). */
  abstract breakRoute(): Promise<void>;
  abstract restoreRoute(): Promise<void>;
  /** Removes the parking lot's route (RabbitMQ: its binding; SQS: the parking queue). */
  abstract breakParking(): Promise<void>;
  abstract restoreParking(): Promise<void>;
  /** A publisher reaching the broker through a proxy the scenario can cut. */
  abstract proxiedPublisher(): Promise<{ publisher: Publisher; proxy: TcpProxy }>;

  /** Messages in the consumer's queue held for dead lettering (only RabbitMQ holds any). */
  async heldForDeadLettering(): Promise<number> {
    return (await this.backend.inspect()).heldForDeadLettering;
  }

  /** A pool on the run's database through a proxy the scenario can cut. */
  async proxiedDb(options: { statementTimeoutMillis?: number } = {}) {
    const p = await proxiedDatabase(this.scratch.database.url, options);
    this.closers.push(() => p.close());
    this.proxiedUrls.set(p.db, p.url);
    return p;
  }

  get name(): string {
    return this.scratch.name;
  }

  async close(): Promise<void> {
    this.faults.disarm();
    for (const close of this.closers.reverse()) await close().catch(() => {});
    await this.scratch.close().catch(() => {});
  }
}
