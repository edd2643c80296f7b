import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { ConsumerSettings } from '../../devkit/consumers.js';
import type { TcpProxy } from '../../devkit/TcpProxy.js';
import type { Publisher } from '../../shared/port/types.js';
import { NATS_NAMES } from '../../shared/transport/nats/constants.js';
import type { NatsBackend } from '../../shared/transport/nats/index.js';
import { natsNames } from '../../shared/transport/nats/index.js';
import { Rig } from './rig.js';
import type { ConsumerLease, PeerBroker, ProxiedBroker } from './types.js';

/**
 * The NATS JetStream backend on the run's name prefix, and its broker controls. Its lease is
 * AckWait, set to the SQS visibility timeout of the run so that the two compare; a frozen or
 * crashed worker's messages come back when it expires.
 */
export class NatsRig extends Rig {
  readonly backend: NatsBackend = this.scratch.backend('nats-jetstream', this.backendBase, {
    ackWaitMs: this.settings.visibilityTimeoutSeconds * 1000,
    connectionName: `lab-${this.scratch.name}`,
    reconnect: { baseMs: 100, maxMs: 1_000 },
    publish: { timeoutMs: 5_000 },
    connectTimeoutMs: 1_000,
  });
  readonly redriveMechanism =
    'republished to its subject with a fresh Nats-Msg-Id, then deleted from the parking stream';

  private get prefix(): string {
    return this.backend.config.prefix ?? '';
  }

  private get servers(): string[] {
    const s = this.backend.config.servers;
    return Array.isArray(s) ? s : [s];
  }

  consumerSettings(): Partial<ConsumerSettings> & { invocationFailed: string } {
    return { invocationFailed: 'batch given back' };
  }

  consumerLease(): ConsumerLease {
    const s = this.settings.visibilityTimeoutSeconds;
    return { child: {}, text: `its AckWait (${s} s)`, ms: s * 1000 };
  }

  /** A proxy in front of the NATS server, and a child's server list through it. */
  override async proxiedBroker(): Promise<ProxiedBroker> {
    const proxy = await this.proxyTo(this.servers[0] as string, 4222);
    return { child: { backend: { servers: [`nats://127.0.0.1:${proxy.port}`] } }, proxy };
  }

  peerBroker(): PeerBroker {
    return {};
  }

  /** Runs `fn` with the server's JetStream manager on a connection of its own. */
  private async manage(fn: (jsm: Awaited<ReturnType<typeof jetstreamManager>>) => Promise<void>) {
    const nc = await connect({ servers: this.servers, timeout: 2_000 });
    try {
      await fn(await jetstreamManager(nc));
    } finally {
      await nc.close();
    }
  }

  /**
   * The order events' stream takes other subjects: a publish finds no stream (no responders),
   * while the stream and its consumer stay (a worker would declare a deleted stream again).
   */
  async breakRoute(): Promise<void> {
    const name = natsNames(this.prefix, this.backend.config.topology).streams.outbox?.stream ?? '';
    await this.manage(async (jsm) => {
      const { config } = await jsm.streams.info(name);
      await jsm.streams.update(name, { ...config, subjects: [`${this.prefix}unrouted.>`] });
    });
  }

  /** The parking stream deleted: a park copy finds no stream and is refused. */
  async breakParking(): Promise<void> {
    await this.manage(async (jsm) => {
      await jsm.streams.delete(`${this.prefix}${NATS_NAMES.parkingStream}`);
    });
  }

  /** A second backend on the run's streams whose connection goes through a proxy. */
  async proxiedPublisher(): Promise<{ publisher: Publisher; proxy: TcpProxy }> {
    const proxy = await this.proxyTo(this.servers[0] as string, 4222);
    const proxied = this.scratch.backend('nats-jetstream', this.backendBase, {
      prefix: this.prefix,
      servers: [`nats://127.0.0.1:${proxy.port}`],
      connectionName: `lab-relay-${this.scratch.name}`,
      publish: { timeoutMs: 1_000 },
      connectTimeoutMs: 500,
    });
    this.closers.push(() => proxied.close());
    return { publisher: proxied.publisher('outbox'), proxy };
  }
}
