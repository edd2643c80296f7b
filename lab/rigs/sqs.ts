import { DeleteQueueCommand } from '@aws-sdk/client-sqs';
import type { ConsumerSettings } from '../../devkit/consumers.js';
import type { SqsFaultLayer } from '../../devkit/emulators/sqsFaults.js';
import type { ScratchEnvironment } from '../../devkit/scratch.js';
import type { TcpProxy } from '../../devkit/TcpProxy.js';
import type { Publisher } from '../../shared/port/types.js';
import type { SqsBackend } from '../../shared/transport/sqs/index.js';
import type { Configuration } from '../configurations.js';
import type { LabServices, LabSettings } from '../settings.js';
import { Rig } from './rig.js';
import type { ConsumerLease, PartialPublish, PeerBroker, RigOptions } from './types.js';

/**
 * The SQS backend on the run's queue prefix, and its controls. Every client of the run (ours, a
 * peer's, a child process's) reaches the SQS endpoint through the run's fault layer
 * (devkit/emulators/sqsFaults.ts: what real queues do that the emulator does not), which passes
 * everything through until a scenario arms a behaviour.
 */
export class SqsRig extends Rig {
  readonly backend: SqsBackend;

  constructor(
    configuration: Configuration,
    settings: LabSettings,
    services: LabServices,
    scratch: ScratchEnvironment,
    options: RigOptions,
    override readonly sqsFaults: SqsFaultLayer,
  ) {
    super(configuration, settings, services, scratch, options);
    this.closers.push(() => sqsFaults.close());
    this.backend = scratch.backend('sqs', this.backendBase, {
      endpoint: sqsFaults.endpoint,
      mode: configuration.sqsMode ?? 'visibility',
      fifo: configuration.fifo ?? false,
      visibilityTimeoutSeconds: settings.visibilityTimeoutSeconds,
      requestTimeoutMs: 5_000,
      maxAttempts: 1,
    });
  }

  override async prepare(): Promise<void> {
    await super.prepare();
    // The embedded server outlives the run (and the test files share one): remove its queues.
    this.closers.push(async () => {
      const q = await this.backend.queues();
      for (const url of [q.sourceUrl, q.parkingUrl, q.resultsUrl]) {
        await this.backend.client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
      }
    });
  }

  override get sqsEndpoint(): string {
    return this.sqsFaults.endpoint;
  }

  override childBackend(): Record<string, unknown> {
    const { logger: _, ...config } = this.backend.config;
    return { ...config, endpoint: this.sqsFaults.endpoint };
  }

  readonly redriveMechanism =
    'receive → send to the source → delete; StartMessageMoveTask is not emulated';

  /** A frozen child's messages become visible again when their visibility timeout expires. */
  consumerLease(): ConsumerLease {
    const s = this.settings.visibilityTimeoutSeconds;
    return { child: {}, text: `its visibility timeout (${s} s)`, ms: s * 1000 };
  }

  /** The fault layer fails every second entry of the next SendMessageBatch. */
  override async failPartOfNextPublish(): Promise<PartialPublish> {
    this.sqsFaults.arm({ kind: 'partial-batch', count: 1 });
    return {
      mark: 'fault layer: every second entry of the next SendMessageBatch fails',
      restore: async () => {},
      note: (round) =>
        `SendMessageBatch answered 200 with ${round.failed} of ${round.claimed} entries in Failed: those rows charged an attempt and sent again, the ${round.published} successful ones marked at once`,
    };
  }

  peerBroker(): PeerBroker {
    return {
      sqs: { client: this.backend.client, endpoint: this.sqsEndpoint, region: 'us-east-1' },
    };
  }

  /** No batching window: the SQS trigger's default (none), as the function is deployed. */
  consumerSettings(): Partial<ConsumerSettings> & { invocationFailed: string } {
    return { invocationFailed: 'invocation failed, batch left in the queue' };
  }

  private async deleteQueue(which: 'sourceUrl' | 'parkingUrl'): Promise<void> {
    const q = await this.backend.queues();
    await this.backend.client.send(new DeleteQueueCommand({ QueueUrl: q[which] }));
  }

  async breakRoute(): Promise<void> {
    await this.deleteQueue('sourceUrl');
  }

  async breakParking(): Promise<void> {
    await this.deleteQueue('parkingUrl');
  }

  /** SQS holds nothing for dead lettering (and its parking queue may be deleted right now). */
  override async heldForDeadLettering(): Promise<number> {
    return 0;
  }

  /** A second backend on the same queues whose client reaches the endpoint through a proxy. */
  async proxiedPublisher(): Promise<{ publisher: Publisher; proxy: TcpProxy }> {
    const proxy = await this.proxyTo(this.services.sqsEndpoint);
    const q = await this.backend.queues();
    const proxied = this.scratch.backend('sqs', this.backendBase, {
      mode: this.backend.config.mode,
      fifo: this.backend.fifo,
      endpoint: `http://127.0.0.1:${proxy.port}`,
      requestTimeoutMs: 500,
      maxAttempts: 1,
      queueUrls: { source: q.sourceUrl, parking: q.parkingUrl, results: q.resultsUrl },
    });
    this.closers.push(() => proxied.close());
    return { publisher: proxied.publisher('outbox'), proxy };
  }
}
