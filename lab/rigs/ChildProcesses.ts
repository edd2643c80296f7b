import type { ConsumerSettings } from '../../devkit/consumers.js';
import type { RetryBudget } from '../../shared/config/budget.js';
import type { Journal } from '../../shared/consumer/journal.js';
import type { LabChildSpec } from '../child.js';
import type { Configuration } from '../configurations.js';
import type { LabSettings } from '../settings.js';
import { LabProcess } from './processes.js';
import type { RunJournal } from './RunJournal.js';
import { type ChildOverrides, RELAY_OPTIONS } from './types.js';

/** What the child processes reach of their rig (its per-transport settings, read when used). */
export interface ChildDeps {
  configuration: Configuration;
  settings: LabSettings;
  budget: RetryBudget;
  databaseUrl: string;
  /** The backend configuration a child builds its own backend from. */
  childBackend: () => Record<string, unknown>;
  consumerSettings: () => Partial<ConsumerSettings> & { invocationFailed: string };
  run: RunJournal;
  onClose: (close: () => Promise<unknown>) => void;
}

/** The run's consumers and relays in processes of their own (lab/child.ts), stopped with the rig. */
export class ChildProcesses {
  constructor(private readonly deps: ChildDeps) {}

  /**
   * The configuration's consumer in a process of its own, ready when this resolves; a scenario
   * may kill, pause and resume it.
   */
  startConsumer(
    name: string,
    options: ChildOverrides & { concurrency?: number } = {},
  ): Promise<LabProcess> {
    const { configuration, settings } = this.deps;
    if (configuration.peer) throw new Error('the peers run in the lab process only');
    const { invocationFailed: _, ...specific } = this.deps.consumerSettings();
    return this.start(name, {
      ...this.spec('consumer', options),
      consumer: {
        mode: configuration.consumer === 'worker' ? 'worker' : 'lambda',
        ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
        batchSize: 10,
        functionTimeoutMs: settings.functionTimeoutMs,
        reconnectBaseMs: 100,
        reconnectMaxMs: 1_000,
        ...specific,
      },
    });
  }

  /** The outbox relay in a process of its own, draining without pause. */
  startRelay(name: string, options: ChildOverrides = {}): Promise<LabProcess> {
    return this.start(name, { ...this.spec('relay', options), relay: RELAY_OPTIONS });
  }

  private async start(name: string, spec: LabChildSpec): Promise<LabProcess> {
    const proc = new LabProcess(name, spec, this.events(name));
    this.deps.onClose(() => proc.stop());
    await proc.waitReady();
    return proc;
  }

  private spec(
    role: LabChildSpec['role'],
    overrides: ChildOverrides,
  ): Omit<LabChildSpec, 'consumer' | 'relay'> {
    return {
      role,
      transport: this.deps.configuration.transport,
      databaseUrl: overrides.databaseUrl ?? this.deps.databaseUrl,
      backend: {
        ...this.deps.childBackend(),
        ...overrides.backend,
        budget: this.deps.budget,
      } as LabChildSpec['backend'],
    };
  }

  /** The events of a child process, into the run's journal and timeline. */
  private events(name: string) {
    const { run } = this.deps;
    return {
      journal: (entry: Parameters<Journal['record']>[0]) => run.journal.record(entry),
      event: (event: string, fields: Record<string, unknown>) => {
        if (event === 'invocation-failed') {
          const { invocationFailed } = this.deps.consumerSettings();
          run.mark(`${name}: ${invocationFailed}: ${String(fields.error)}`, 'failed-invocation');
        } else if (event === 'round-failed') {
          run.mark(`${name}: relay round failed: ${String(fields.error)}`);
        }
      },
    };
  }
}
