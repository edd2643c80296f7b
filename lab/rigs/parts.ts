import type { ConsumerSettings } from '../../devkit/consumers.js';
import type { LocalPipeline } from '../../devkit/lambda/localPipeline.js';
import type { ScratchEnvironment } from '../../devkit/scratch.js';
import type { RetryBudget } from '../../shared/config/budget.js';
import type { Backend, ParkingLot } from '../../shared/port/types.js';
import type { Configuration } from '../configurations.js';
import type { LabServices, LabSettings } from '../settings.js';
import { ChildProcesses } from './ChildProcesses.js';
import { ConsumerSide } from './ConsumerSide.js';
import { DatabaseControls } from './DatabaseControls.js';
import { PeerConsumer } from './PeerConsumer.js';
import { ProducerSide } from './ProducerSide.js';
import { RunJournal } from './RunJournal.js';
import type { PeerBroker } from './types.js';

/** The parts a rig is composed of, one job each. */
export interface RigParts {
  run: RunJournal;
  database: DatabaseControls;
  /** A peer configuration's consumer (undefined for ours). */
  peer: PeerConsumer | undefined;
  producer: ProducerSide;
  consumer: ConsumerSide;
  children: ChildProcesses;
}

/** What the parts reach of their rig; the functions read its per-transport members when used. */
export interface RigContext {
  configuration: Configuration;
  settings: LabSettings;
  services: LabServices;
  scratch: ScratchEnvironment;
  budget: RetryBudget;
  backend: () => Backend;
  parkingLot: () => ParkingLot;
  /** The deployed bundles the run uses, if any. */
  pipeline: () => LocalPipeline | undefined;
  consumerSettings: () => Partial<ConsumerSettings> & { invocationFailed: string };
  childBackend: () => Record<string, unknown>;
  peerBroker: () => PeerBroker;
  /** Closes something with the rig (in reverse order of registration). */
  onClose: (close: () => Promise<unknown>) => void;
}

/** The parts of one rig, wired to each other and to the rig's context. */
export function composeParts(ctx: RigContext): RigParts {
  const { configuration, settings, scratch, budget, onClose } = ctx;
  const run = new RunJournal(settings.waitMs);
  const db = scratch.database.db;
  const common = { settings, budget, db, run, onClose };
  const database = new DatabaseControls(db, scratch.database.url, onClose);
  const peer = peerOf(ctx, run, database);
  const producer = new ProducerSide({
    ...common,
    name: scratch.name,
    waitMs: settings.waitMs,
    backend: ctx.backend,
    peer: peer && (() => peer),
    pipeline: ctx.pipeline,
  });
  const consumer = new ConsumerSide({
    ...common,
    ...ctx,
    db,
    droppedCopies: producer.droppedCopies,
  });
  const children = new ChildProcesses({
    ...common,
    configuration,
    databaseUrl: scratch.database.url,
    childBackend: ctx.childBackend,
    consumerSettings: ctx.consumerSettings,
  });
  return { run, database, peer, producer, consumer, children };
}

function peerOf(ctx: RigContext, run: RunJournal, database: DatabaseControls) {
  const { configuration, scratch } = ctx;
  if (!configuration.peer) return undefined;
  return new PeerConsumer(configuration.peer, {
    configurationId: configuration.id,
    db: scratch.database.db,
    sqsPrefix: scratch.sqsPrefix,
    databaseUrl: (db) => database.urlOf(db),
    broker: ctx.peerBroker,
    maxAttempts: ctx.budget.maxAttempts,
    settings: ctx.settings,
    run,
    onClose: ctx.onClose,
  });
}
