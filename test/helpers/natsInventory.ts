import { createScratch, type ScratchEnvironment } from '../../devkit/scratch.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import type { RunningConsumer } from '../../shared/index.js';
import { DEFAULT_RETENTION, type RetryBudget } from '../../shared/index.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import type { NatsBackend, NatsBackendConfig } from '../../shared/transport/nats/index.js';
import { ConsumerRig, RIG_CONSUMER, type RigConsumerOptions } from './inventory.js';
import { SERVICES } from './services.js';

/**
 * The NATS JetStream twin of InventoryRig: its own database and its own streams and consumers
 * (by name prefix) on the shared server, prepared by the backend. The reserve consumer runs as a
 * worker (nothing deploys JetStream: no Lambda event source); a retry is a `nak(delay)`, the same
 * message delivered again.
 */
export class NatsInventoryRig extends ConsumerRig<NatsBackend> {
  static async create(
    label: string,
    budget: RetryBudget = TEST_RETRY_BUDGET,
    /** Backend settings beyond the rig's (e.g. `ackWaitMs`). */
    overrides: Partial<NatsBackendConfig> = {},
  ): Promise<NatsInventoryRig> {
    const scratch = await createScratch(SERVICES, label, { transports: ['nats-jetstream'] });
    try {
      const backend = scratch.backend(
        'nats-jetstream',
        {
          budget,
          retention: DEFAULT_RETENTION,
          consumer: RIG_CONSUMER,
          topology: PIPELINE_TOPOLOGY,
        },
        { reconnect: { baseMs: 50, maxMs: 500 }, ...overrides },
      );
      await backend.prepare();
      return new NatsInventoryRig(scratch, backend, budget);
    } catch (err) {
      await scratch.close();
      throw err;
    }
  }

  private constructor(scratch: ScratchEnvironment, backend: NatsBackend, budget: RetryBudget) {
    super(scratch, backend, budget);
  }

  readonly retryComesBackAs = 'redelivery';

  start(options: RigConsumerOptions = {}): Promise<RunningConsumer> {
    return this.consumer(options.db, {
      mode: 'worker',
      reconnectBaseMs: 100,
      reconnectMaxMs: 1_000,
    });
  }

  cliEnv(): Record<string, string> {
    const { servers, prefix } = this.backend.config;
    return { NATS_URL: [servers].flat().join(','), NATS_PREFIX: prefix ?? '' };
  }

  override devEnv(): Record<string, string> {
    const { ackWaitMs } = this.backend.config;
    return { ...super.devEnv(), ...(ackWaitMs ? { NATS_ACK_WAIT_MS: String(ackWaitMs) } : {}) };
  }
}
