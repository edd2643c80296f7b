import type { Journal } from '../../shared/consumer/journal.js';
import type { LabChildSpec } from '../child.js';
import { LabProcess } from './processes.js';
import type { Rig } from './rig.js';
import { type ChildOverrides, RELAY_OPTIONS } from './types.js';

/** The run's consumers and relays in processes of their own (lab/child.ts), stopped with the rig. */
export class ChildProcesses {
  constructor(private readonly rig: Rig) {}

  /**
   * The configuration's consumer in a process of its own, ready when this resolves; a scenario
   * may kill, pause and resume it.
   */
  startConsumer(
    name: string,
    options: ChildOverrides & { concurrency?: number } = {},
  ): Promise<LabProcess> {
    if (this.rig.configuration.peer) throw new Error('the peers run in the lab process only');
    return this.start(name, {
      ...this.spec('consumer', options),
      consumer: this.rig.consumer.settings(options.concurrency),
    });
  }

  /** The outbox relay in a process of its own, draining without pause. */
  startRelay(name: string, options: ChildOverrides = {}): Promise<LabProcess> {
    return this.start(name, { ...this.spec('relay', options), relay: RELAY_OPTIONS });
  }

  private async start(name: string, spec: LabChildSpec): Promise<LabProcess> {
    const proc = new LabProcess(name, spec, this.events(name));
    this.rig.onClose(() => proc.stop());
    await proc.waitReady();
    return proc;
  }

  private spec(
    role: LabChildSpec['role'],
    overrides: ChildOverrides,
  ): Omit<LabChildSpec, 'consumer' | 'relay'> {
    return {
      role,
      transport: this.rig.configuration.transport,
      // the consumer is inventory's (its database); the relay publishes the order service's outbox
      databaseUrl:
        overrides.databaseUrl ??
        this.rig.scratch.databases[role === 'consumer' ? 'inventory' : 'orders'].url,
      backend: {
        ...this.rig.childBackend(),
        ...overrides.backend,
        budget: this.rig.budget,
      } as LabChildSpec['backend'],
    };
  }

  /** The events of a child process, into the run's journal and timeline. */
  private events(name: string) {
    const { run } = this.rig;
    return {
      journal: (entry: Parameters<Journal['record']>[0]) => run.journal.record(entry),
      event: (event: string, fields: Record<string, unknown>) => {
        if (event === 'invocation-failed') {
          const { invocationFailed } = this.rig.consumerSettings();
          run.mark(`${name}: ${invocationFailed}: ${String(fields.error)}`, 'failed-invocation');
        } else if (event === 'round-failed') {
          run.mark(`${name}: relay round failed: ${String(fields.error)}`);
        }
      },
    };
  }
}
