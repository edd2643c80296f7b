import type { ConsumerSettings } from '../../devkit/consumers.js';
import type { SqsFaultLayer } from '../../devkit/emulators/sqsFaults.js';
import { type RunningEventSource, startSchedule } from '../../devkit/lambda/eventSources.js';
import type { LocalPipeline } from '../../devkit/lambda/localPipeline.js';
import type { ScratchEnvironment } from '../../devkit/scratch.js';
import { TcpProxy } from '../../devkit/TcpProxy.js';
import { DEFAULT_RETENTION, type RetryBudget } from '../../shared/config/budget.js';
import { FaultScope } from '../../shared/config/faults.js';
import type { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import type { Backend, Publisher } from '../../shared/port/types.js';
import type { BackendBase } from '../../shared/transport/index.js';
import type { Configuration } from '../configurations.js';
import type { LabServices, LabSettings } from '../settings.js';
import type { ParkedSummary } from '../types.js';
import { ChildProcesses } from './ChildProcesses.js';
import { ConsumerSide } from './ConsumerSide.js';
import { DatabaseControls } from './DatabaseControls.js';
import { log } from './log.js';
import { PeerConsumer } from './PeerConsumer.js';
import { ProducerSide } from './ProducerSide.js';
import { RunJournal } from './RunJournal.js';
import type {
  ConsumerLease,
  ConsumerOptions,
  PartialPublish,
  PeerBroker,
  ProxiedBroker,
  RigOptions,
} from './types.js';

/**
 * Everything one scenario run needs on one configuration, all of its own: a scratch environment
 * (database, virtual host or queue prefix) and the backend on it, composed of parts with one job
 * each: what the run observed (`RunJournal`), the producer side (HTTP API, outbox, relay), our
 * consumer or a peer's, child processes, database controls. Transport-neutral: the backend is
 * built and the broker controls are written once per transport (`rabbitmq.ts`, `sqs.ts`,
 * `nats.ts`); `createRig` (index.ts) picks one.
 */
export abstract class Rig {
  readonly faults = new FaultScope();
  readonly budget: RetryBudget;
  /** What a scenario observed on the way (relay round results, errors read back), for its checks. */
  readonly facts: Record<string, unknown> = {};
  /** The run's backend (built, not connected: `prepare` connects and declares). */
  abstract readonly backend: Backend & { readonly config: BackendBase };
  /** The SQS fault layer every client of the run goes through (SQS runs only). */
  readonly sqsFaults?: SqsFaultLayer | undefined;
  /** How a redrive moves a parked message back, in a few words (the parking notes). */
  abstract readonly redriveMechanism: string;
  protected readonly closers: (() => Promise<unknown>)[] = [];
  /** The deployed bundles the consumer and relay run from (`--bundles`), with the relay's schedule. */
  private bundles: { pipeline: LocalPipeline; relay?: RunningEventSource } | undefined;
  /** What the run observed (journal, marks, accepted and uncertain events) and the waits on it. */
  readonly run: RunJournal;
  /** The orders API, the outbox, the relay and the publisher. */
  readonly producer: ProducerSide;
  /** Our consumer in the lab process (see `startConsumer`, `waitSettled`, `parked` for either). */
  readonly consumer: ConsumerSide;
  /** A peer configuration's consumer (undefined for ours). */
  readonly peer: PeerConsumer | undefined;
  /** Our consumer or the relay in a process of its own. */
  readonly children: ChildProcesses;
  /** The inventory database's controls: stock, reservation failures, pools through a proxy. */
  readonly database: DatabaseControls;

  constructor(
    readonly configuration: Configuration,
    readonly settings: LabSettings,
    readonly services: LabServices,
    readonly scratch: ScratchEnvironment,
    options: RigOptions,
  ) {
    this.budget = { ...settings.budget, ...options.budget };
    this.run = new RunJournal(settings.waitMs);
    this.database = new DatabaseControls(
      scratch.databases.inventory.db,
      scratch.databases.inventory.url,
      (close) => this.onClose(close),
    );
    // each part reaches what it needs of the rig when it is used (the backend is built later)
    this.peer = configuration.peer ? new PeerConsumer(configuration.peer, this) : undefined;
    this.producer = new ProducerSide(this);
    this.consumer = new ConsumerSide(this);
    this.children = new ChildProcesses(this);
  }

  /** Runs `close` when the rig closes (the last registered first). */
  onClose(close: () => Promise<unknown>): void {
    this.closers.push(close);
  }

  /** The deployed bundles the run uses, if any (`useBundles`). */
  get pipeline(): LocalPipeline | undefined {
    return this.bundles?.pipeline;
  }

  // --- our consumer or a peer's ---

  /** Starts the configuration's consumer: ours, or a peer's (see `ConsumerSide`, `PeerConsumer`). */
  startConsumer(options: ConsumerOptions = {}): Promise<void> {
    return this.peer ? this.peer.start(options) : this.consumer.start(options);
  }

  /**
   * Waits until these events are settled: ours, each acknowledged `copies` times; a peer's, each
   * committed or parked and its queue idle.
   */
  waitSettled(eventIds: string[], copies = 1): Promise<void> {
    return this.peer
      ? this.peer.waitSettled(eventIds)
      : this.consumer.waitSettled(eventIds, copies);
  }

  /**
   * A peer's run waits here until these events are settled its own way, and answers true; ours
   * answers false at once (its scenario goes on to wait for what our mechanism does).
   */
  async peerSettled(eventIds: string[]): Promise<boolean> {
    if (!this.peer) return false;
    await this.peer.waitSettled(eventIds);
    return true;
  }

  /** What is parked: our parking lot with its diagnoses, or a peer's dead-letter queue. */
  parked(limit = 500): Promise<ParkedSummary[]> {
    return this.peer ? this.peer.parked(limit) : this.consumer.parked(limit);
  }

  // --- per transport ---

  /** What every backend of this run is configured with (the run's budget, its consumer name). */
  protected get backendBase(): BackendBase {
    return {
      budget: this.budget,
      retention: DEFAULT_RETENTION,
      topology: PIPELINE_TOPOLOGY,
      consumer: `inventory@lab-${this.configuration.id}`,
      logger: log(),
    };
  }

  /**
   * The backend configuration a child process (lab/child.ts) builds its own backend from: this
   * run's, without its logger, and the child's own settings (by default its connection's name).
   */
  childBackend(): Record<string, unknown> {
    const { logger: _, ...config } = this.backend.config;
    return { ...config, connectionName: `lab-child-${this.scratch.name}` };
  }

  /**
   * Consumer settings of this transport beyond the common ones, and what a failed invocation of
   * its Lambda trigger means (the label of the `failed-invocation` mark).
   */
  abstract consumerSettings(): Partial<ConsumerSettings> & { invocationFailed: string };

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

  /** How the peer libraries reach this run's broker. */
  abstract peerBroker(): PeerBroker;

  /** The SQS endpoint this run's clients use (the fault layer's, on SQS). */
  get sqsEndpoint(): string {
    return this.services.sqsEndpoint;
  }

  /** Removes the route to the consumer's queue (RabbitMQ: bindings; SQS: the queue itself). */
  abstract breakRoute(): Promise<void>;
  /**
   * Puts the route back: by default the backend declares what it needs again (SQS: the queues,
   * same names so the same URLs; NATS: the streams with their subjects).
   */
  async restoreRoute(): Promise<void> {
    await this.backend.prepare();
  }
  /** Removes the parking lot's route (RabbitMQ: its binding; SQS: the parking queue). */
  abstract breakParking(): Promise<void>;
  /** Puts the parking lot's route back (by default, as `restoreRoute`). */
  async restoreParking(): Promise<void> {
    await this.backend.prepare();
  }
  /** A publisher reaching the broker through a proxy the scenario can cut. */
  abstract proxiedPublisher(): Promise<{ publisher: Publisher; proxy: TcpProxy }>;

  /** A proxy to the host and port of `url` (`defaultPort` when it has none), closed with the rig. */
  protected async proxyTo(url: string, defaultPort?: number): Promise<TcpProxy> {
    const target = new URL(url);
    const proxy = await new TcpProxy(target.hostname, Number(target.port || defaultPort)).start();
    this.closers.push(() => proxy.close());
    return proxy;
  }

  /** Messages in the consumer's queue held for dead lettering (only RabbitMQ holds any). */
  async heldForDeadLettering(): Promise<number> {
    return (await this.backend.inspect()).heldForDeadLettering;
  }

  // --- lifecycle ---

  /** Creates the transport's resources (called once, inside the rig's fault scope). */
  async prepare(): Promise<void> {
    await this.backend.prepare();
    await this.peer?.prepare();
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
    this.bundles.relay = startSchedule(this.bundles.pipeline.deployment, 'outbox-relay', {
      logger: log(),
    });
  }

  async close(): Promise<void> {
    this.faults.disarm();
    for (const close of this.closers.reverse()) await close().catch(() => {});
    await this.scratch.close().catch(() => {});
  }

  /** The order service's database (orders, its outbox). */
  get ordersDb(): PgDatabase {
    return this.scratch.databases.orders.db;
  }

  /** The inventory service's database (stock, reservations, its inbox and outbox). */
  get inventoryDb(): PgDatabase {
    return this.scratch.databases.inventory.db;
  }
}
