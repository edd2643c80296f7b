import {
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../../logger.js';
import { TransportUnavailableError } from '../../port/errors.js';
import { withTimeout } from '../../util/async.js';

export interface NatsClientOptions {
  servers: string | string[];
  name: string;
  connectTimeoutMs: number;
  /** JetStream API requests (stream and consumer management, direct gets). */
  requestTimeoutMs: number;
}

/** One connection and its JetStream contexts. */
interface Connected {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
}

/**
 * The backend's one NATS connection, opened on first use. Once up, the client reconnects by
 * itself for ever (JetStream keeps the consumers' state on the server); a connection that failed
 * to open or was closed is opened again on the next use.
 */
export class NatsClient {
  private connected: Promise<Connected> | undefined;
  private closed = false;
  /** Between a `disconnect` and the next `reconnect` status of the open connection. */
  private down = false;

  constructor(
    private readonly options: NatsClientOptions,
    private readonly logger?: Logger,
  ) {}

  private open(): Promise<Connected> {
    if (this.closed) return Promise.reject(new TransportUnavailableError('NATS client closed'));
    const opening = (async () => {
      const nc = await connect({
        servers: this.options.servers,
        name: this.options.name,
        timeout: this.options.connectTimeoutMs,
        maxReconnectAttempts: -1,
      });
      const timeout = this.options.requestTimeoutMs;
      // checks that JetStream answers on this account (an account info request)
      const jsm = await jetstreamManager(nc, { timeout }).catch(async (err: unknown) => {
        await nc.close();
        throw err;
      });
      void nc.closed().then(() => {
        if (this.connected === opening) this.connected = undefined;
      });
      void this.watch(nc);
      this.logger?.info('NATS connected', { server: nc.getServer(), version: nc.info?.version });
      return { nc, js: jetstream(nc, { timeout }), jsm };
    })();
    opening.catch(() => {
      if (this.connected === opening) this.connected = undefined;
    });
    return opening;
  }

  /** Follows the connection's status: down from a disconnect until it reconnected. */
  private async watch(nc: NatsConnection): Promise<void> {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect') this.down = true;
      if (status.type === 'reconnect') this.down = false;
    }
  }

  private current(): Promise<Connected> {
    this.connected ??= this.open();
    return this.connected;
  }

  async connection(): Promise<NatsConnection> {
    return (await this.current()).nc;
  }

  async js(): Promise<JetStreamClient> {
    return (await this.current()).js;
  }

  async jsm(): Promise<JetStreamManager> {
    return (await this.current()).jsm;
  }

  /**
   * Resolves while the connection is up (JetStream answered when it opened: an account info
   * request), as a RabbitMQ channel that is open; rejects with `TransportUnavailableError` within
   * `timeoutMs` when it cannot be opened or is down.
   */
  async ready(timeoutMs: number): Promise<string> {
    try {
      return await withTimeout(
        (async () => {
          const { nc } = await this.current();
          if (this.down || nc.isClosed()) throw new Error('disconnected, reconnecting');
          return nc.info?.version ?? 'unknown';
        })(),
        timeoutMs,
        () => new Error(`JetStream did not answer within ${timeoutMs} ms`),
      );
    } catch (err) {
      throw new TransportUnavailableError(`NATS not reachable: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  /** Drains the connection (flushes what was published, ends subscriptions). Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const connected = await this.connected?.catch(() => undefined);
    this.connected = undefined;
    if (connected && !connected.nc.isClosed()) await connected.nc.drain().catch(() => {});
  }
}
