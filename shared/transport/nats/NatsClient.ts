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
      const jsm = await jetstreamManager(nc, { timeout }).catch(async (err: unknown) => {
        await nc.close();
        throw err;
      });
      void nc.closed().then(() => {
        if (this.connected === opening) this.connected = undefined;
      });
      this.logger?.info('NATS connected', { server: nc.getServer(), version: nc.info?.version });
      return { nc, js: jetstream(nc, { timeout }), jsm };
    })();
    opening.catch(() => {
      if (this.connected === opening) this.connected = undefined;
    });
    return opening;
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
   * The server's version once JetStream answers (an account info request), or a
   * `TransportUnavailableError` within `timeoutMs`.
   */
  async ready(timeoutMs: number): Promise<string> {
    try {
      return await withTimeout(
        (async () => {
          const { nc, jsm } = await this.current();
          await jsm.getAccountInfo();
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
