import { type ConsumerSettings, startConsumer } from '../../devkit/consumers.js';
import type { LocalPipeline } from '../../devkit/lambda/localPipeline.js';
import type { ScratchEnvironment } from '../../devkit/scratch.js';
import { localTransport } from '../../devkit/transports/index.js';
import type { RetryBudget } from '../../shared/config/budget.js';
import type { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type { SqlDatabase } from '../../shared/db/types.js';
import { INVENTORY_PARK_NOTICES } from '../../shared/inventory/quarantine.js';
import { ReserveInventory } from '../../shared/inventory/ReserveInventory.js';
import type { Backend } from '../../shared/port/types.js';
import type { Configuration } from '../configurations.js';
import type { LabServices, LabSettings } from '../settings.js';
import type { ParkedSummary } from '../types.js';
import { log } from './log.js';
import type { RunJournal } from './RunJournal.js';
import type { ConsumerOptions } from './types.js';

/** What our consumer reaches of its rig (the backend is built after the rig's base). */
export interface ConsumerDeps {
  configuration: Configuration;
  settings: LabSettings;
  services: LabServices;
  scratch: ScratchEnvironment;
  db: PgDatabase;
  budget: RetryBudget;
  backend: () => Backend;
  consumerSettings: () => Partial<ConsumerSettings> & { invocationFailed: string };
  /** The deployed bundles the run uses, if any. */
  pipeline: () => LocalPipeline | undefined;
  /** Copies the broker dropped as duplicates, by event id (nobody waits for them). */
  droppedCopies: ReadonlyMap<string, number>;
  run: RunJournal;
  onClose: (close: () => Promise<unknown>) => void;
}

/**
 * Our consumer of the inventory queue in the lab process: the worker, or the reserve function
 * behind its Lambda trigger's emulation (from the bundles, the reserve bundle behind its event
 * source); what it settled and parked.
 */
export class ConsumerSide {
  constructor(private readonly deps: ConsumerDeps) {}

  useCase(db: SqlDatabase = this.deps.db): ReserveInventory {
    return new ReserveInventory(
      { db, journal: this.deps.run.journal, logger: log() },
      { budget: this.deps.budget },
    );
  }

  /** Starts the consumer around the use case (a failed invocation is marked on the timeline). */
  async start(options: ConsumerOptions): Promise<void> {
    const pipeline = this.deps.pipeline();
    if (pipeline && this.deps.configuration.consumer !== 'worker')
      return this.startEventSource(pipeline);
    const useCase = this.useCase(options.db);
    const { invocationFailed, ...specific } = this.deps.consumerSettings();
    const consumer = await startConsumer(this.deps.backend(), (m) => useCase.process(m), {
      mode: this.deps.configuration.consumer === 'worker' ? 'worker' : 'lambda',
      journal: this.deps.run.journal,
      // parked order events are announced on the results queue, as deployed (nothing in the lab
      // reads that queue: the accounting counts inventory's inbox and parking lot only)
      notices: INVENTORY_PARK_NOTICES,
      logger: log(),
      ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
      batchSize: 10,
      functionTimeoutMs: this.deps.settings.functionTimeoutMs,
      reconnectBaseMs: 100,
      reconnectMaxMs: 1_000,
      ...specific,
      onInvocationError: (err) =>
        this.deps.run.mark(`${invocationFailed}: ${err.message}`, 'failed-invocation'),
    });
    this.deps.onClose(() => consumer.stop());
  }

  /** The reserve bundle behind its event source mapping, all settings from the template. */
  private async startEventSource(pipeline: LocalPipeline): Promise<void> {
    const { configuration, services, scratch } = this.deps;
    const { invocationFailed } = this.deps.consumerSettings();
    const onInvocationError = (err: Error) =>
      this.deps.run.mark(`${invocationFailed}: ${err.message}`, 'failed-invocation');
    const deployed = localTransport(configuration.transport).deployed;
    if (!deployed) throw new Error(`--bundles: nothing deploys ${configuration.transport}`);
    const source = await deployed.startEventSource(
      pipeline.deployment,
      deployed.functions.inventory,
      {
        amqpUrl: services.amqpUrl,
        vhost: scratch.vhost?.vhost,
        logger: log(),
        onInvocationError,
      },
    );
    this.deps.onClose(() => source.stop());
  }

  /** Waits until each of these events is acknowledged `copies` times (journal `acked`). */
  async waitSettled(eventIds: string[], copies: number): Promise<void> {
    for (const id of eventIds) {
      const delivered = Math.max(1, copies - (this.deps.droppedCopies.get(id) ?? 0));
      await this.deps.run.waitForLine(id, 'acked', delivered);
    }
  }

  /** Our parking lot with its diagnoses. */
  async parked(limit: number): Promise<ParkedSummary[]> {
    return (await this.deps.backend().parkingLot().list(limit)).map((p) => ({
      messageId: p.diagnosis.messageId,
      reason: p.diagnosis.reason,
      errorClass: p.diagnosis.errorClass,
      error: p.diagnosis.error,
      via: p.via,
      attempts: p.diagnosis.attempts,
    }));
  }
}
