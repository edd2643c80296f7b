import amqp, { type ConfirmChannel, type RecoveringChannelModel } from 'amqplib';
import type { Logger } from '../../logger.js';
import { withTimeout } from '../../util/async.js';
import { TransportUnavailableError } from '../errors.js';
import { RABBITMQ_DEFAULTS } from './constants.js';

export interface RabbitConnectionOptions {
  /**
   * The AMQP URL, or a function that resolves it on first connect (deployed functions read the
   * Amazon MQ credentials from Secrets Manager then, never from their environment).
   */
  url: string | (() => Promise<string>);
  /** Name shown in the management UI. */
  connectionName?: string;
  /** First reconnect delay (ms); doubles up to `maxReconnectDelayMs`, with ±20 % jitter. */
  initialReconnectDelayMs?: number;
  maxReconnectDelayMs?: number;
  heartbeatSeconds?: number;
}

/**
 * One AMQP connection with bounded, jittered reconnects (amqplib's built-in recovery: one
 * reconnect loop per connection, exponential backoff capped at `maxReconnectDelayMs`, so a broker
 * outage never causes a reconnect storm). Channels are opened by their owners (a publisher's
 * `ConfirmedChannel`, a worker, an inspection) and closed by them.
 */
export class RabbitConnection {
  private model: RecoveringChannelModel | undefined;
  private modelPromise: Promise<RecoveringChannelModel> | undefined;
  private closed = false;

  constructor(
    private readonly options: RabbitConnectionOptions,
    private readonly logger?: Logger,
  ) {}

  private connectModel(): Promise<RecoveringChannelModel> {
    this.modelPromise ??= (async () => {
      const { url: source } = this.options;
      const url = new URL(typeof source === 'string' ? source : await source());
      const model = await amqp.connect(
        {
          protocol: url.protocol.replace(':', ''),
          hostname: url.hostname,
          port: url.port ? Number(url.port) : undefined,
          username: decodeURIComponent(url.username || 'guest'),
          password: decodeURIComponent(url.password || 'guest'),
          vhost: url.pathname.length > 1 ? decodeURIComponent(url.pathname.slice(1)) : '/',
          heartbeat: this.options.heartbeatSeconds ?? 10,
        },
        {
          clientProperties: {
            connection_name: this.options.connectionName ?? 'reliable-messaging',
          },
          recovery: {
            waitForConnect: false,
            initialDelay: this.options.initialReconnectDelayMs ?? RABBITMQ_DEFAULTS.reconnectBaseMs,
            maxDelay: this.options.maxReconnectDelayMs ?? RABBITMQ_DEFAULTS.reconnectMaxMs,
            factor: 2,
            jitter: 0.2,
            maxRetries: Number.POSITIVE_INFINITY,
          },
        },
      );
      model.on('error', (err) =>
        this.logger?.warn('amqp connection error', { error: err.message }),
      );
      model.on('disconnect', (err) => {
        this.logger?.warn('amqp disconnected', { error: err?.message });
      });
      model.on('reconnect-scheduled', ({ attempt, delay }) =>
        this.logger?.info('amqp reconnect scheduled', { attempt, delayMs: delay }),
      );
      model.on('connect', () => this.logger?.info('amqp connected'));
      this.model = model;
      return model;
    })().catch((err: unknown) => {
      // e.g. the credentials could not be read: the next call tries again
      this.modelPromise = undefined;
      throw err;
    });
    return this.modelPromise;
  }

  /**
   * A new confirm channel owned by the caller (consumers: one for consuming, one for settling).
   * Waits at most `timeoutMs` for the broker.
   */
  async openChannel(timeoutMs = 5_000): Promise<ConfirmChannel> {
    if (this.closed) throw new TransportUnavailableError('connection closed');
    const model = await this.connectModel();
    const ch = await withTimeout(
      model.createConfirmChannel(),
      timeoutMs,
      () => new TransportUnavailableError(`broker not reachable within ${timeoutMs} ms`),
      (late) => void late.close().catch(() => {}),
    );
    ch.on('error', (err: Error) => this.logger?.warn('amqp channel error', { error: err.message }));
    return ch;
  }

  /** Runs `fn` on a channel of its own (topology, inspection), closed afterwards. */
  async withChannel<T>(fn: (ch: ConfirmChannel) => Promise<T>, timeoutMs = 5_000): Promise<T> {
    const ch = await this.openChannel(timeoutMs);
    try {
      return await fn(ch);
    } finally {
      await ch.close().catch(() => {});
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const model =
      this.model ??
      (this.modelPromise ? await this.modelPromise.catch(() => undefined) : undefined);
    await model?.close().catch(() => {});
  }
}
