import { type ConsumerSettings, startConsumer } from '../../devkit/consumers.js';
import type { LocalPipeline } from '../../devkit/lambda/localPipeline.js';
import { localTransport } from '../../devkit/transports/index.js';
import type { SqlDatabase } from '../../shared/db/types.js';
import { INVENTORY_PARK_NOTICES } from '../../shared/inventory/quarantine.js';
import { ReserveInventory } from '../../shared/inventory/ReserveInventory.js';
import type { ParkedSummary } from '../types.js';
import { log } from './log.js';
import type { Rig } from './rig.js';
import type { ConsumerOptions } from './types.js';

/**
 * Our consumer of the inventory queue in the lab process: the worker, or the reserve function
 * behind its Lambda trigger's emulation (from the bundles, the reserve bundle behind its event
 * source); what it settled and parked.
 */
export class ConsumerSide {
  constructor(private readonly rig: Rig) {}

  useCase(db: SqlDatabase = this.rig.inventoryDb): ReserveInventory {
    return new ReserveInventory(
      { db, journal: this.rig.run.journal, logger: log() },
      { budget: this.rig.budget },
    );
  }

  /**
   * The settings our consumer runs with, in the lab process or a child's (the transport's own on
   * top), without the journal, logger and invocation error handler each place gives it.
   */
  settings(concurrency: number | undefined): Omit<ConsumerSettings, 'journal'> {
    const { invocationFailed: _, ...specific } = this.rig.consumerSettings();
    return {
      mode: this.rig.configuration.consumer === 'worker' ? 'worker' : 'lambda',
      ...(concurrency !== undefined ? { concurrency } : {}),
      batchSize: 10,
      functionTimeoutMs: this.rig.settings.functionTimeoutMs,
      reconnectBaseMs: 100,
      reconnectMaxMs: 1_000,
      ...specific,
    };
  }

  /** Starts the consumer around the use case (a failed invocation is marked on the timeline). */
  async start(options: ConsumerOptions): Promise<void> {
    const { pipeline } = this.rig;
    if (pipeline && this.rig.configuration.consumer !== 'worker')
      return this.startEventSource(pipeline);
    const useCase = this.useCase(options.db);
    const consumer = await startConsumer(this.rig.backend, (m) => useCase.process(m), {
      ...this.settings(options.concurrency),
      journal: this.rig.run.journal,
      // parked order events are announced on the results queue, as deployed (nothing in the lab
      // reads that queue: the accounting counts inventory's inbox and parking lot only)
      notices: INVENTORY_PARK_NOTICES,
      logger: log(),
      onInvocationError: this.invocationFailed,
    });
    this.rig.onClose(() => consumer.stop());
  }

  /** A failed invocation, marked on the timeline with what it means on this transport. */
  private readonly invocationFailed = (err: Error) =>
    this.rig.run.mark(
      `${this.rig.consumerSettings().invocationFailed}: ${err.message}`,
      'failed-invocation',
    );

  /** The reserve bundle behind its event source mapping, all settings from the template. */
  private async startEventSource(pipeline: LocalPipeline): Promise<void> {
    const { configuration, services, scratch } = this.rig;
    const deployed = localTransport(configuration.transport).deployed;
    if (!deployed) throw new Error(`--bundles: nothing deploys ${configuration.transport}`);
    const source = await deployed.startEventSource(
      pipeline.deployment,
      deployed.functions.inventory,
      {
        amqpUrl: services.amqpUrl,
        vhost: scratch.vhost?.vhost,
        logger: log(),
        onInvocationError: this.invocationFailed,
      },
    );
    this.rig.onClose(() => source.stop());
  }

  /** Waits until each of these events is acknowledged `copies` times (journal `acked`). */
  async waitSettled(eventIds: string[], copies: number): Promise<void> {
    for (const id of eventIds) {
      const delivered = Math.max(1, copies - (this.rig.producer.droppedCopies.get(id) ?? 0));
      await this.rig.run.waitForLine(id, 'acked', delivered);
    }
  }

  /** Our parking lot with its diagnoses. */
  async parked(limit: number): Promise<ParkedSummary[]> {
    return (await this.rig.backend.parkingLot().list(limit)).map((p) => ({
      messageId: p.diagnosis.messageId,
      reason: p.diagnosis.reason,
      errorClass: p.diagnosis.errorClass,
      error: p.diagnosis.error,
      via: p.via,
      attempts: p.diagnosis.attempts,
    }));
  }
}
