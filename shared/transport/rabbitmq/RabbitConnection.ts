import amqp, { type ConfirmChannel, type Message, type RecoveringChannelModel } from 'amqplib';
import type { Logger } from '../../logger.js';
import { withTimeout } from '../../util/async.js';
import { TransportUnavailableError } from '../errors.js';

interface ChannelState {
  /** Message ids the broker returned (unroutable), until their confirm is handled. */
  returned: Map<string, string>;
  closeReason: string | undefined;
}

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
 * outage never causes a reconnect storm) and one shared confirm channel, recreated after it dies.
 */
export class RabbitConnection {
  private model: RecoveringChannelModel | undefined;
  private modelPromise: Promise<RecoveringChannelModel> | undefined;
  private channel: ConfirmChannel | undefined;
  private channelPromise: Promise<ConfirmChannel> | undefined;
  private closed = false;
  private readonly states = new WeakMap<ConfirmChannel, ChannelState>();

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
            initialDelay: this.options.initialReconnectDelayMs ?? 200,
            maxDelay: this.options.maxReconnectDelayMs ?? 5_000,
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
   * The shared confirm channel, created on first use and after the previous one closed. Waits at
   * most `timeoutMs` for the broker, then throws `TransportUnavailableError`.
   */
  async confirmChannel(timeoutMs = 5_000): Promise<ConfirmChannel> {
    if (this.closed) throw new TransportUnavailableError('connection closed');
    if (this.channel) return this.channel;
    this.channelPromise ??= this.openSharedChannel().finally(() => {
      this.channelPromise = undefined;
    });
    // A late channel is not leaked: it is cached by openSharedChannel for the next caller.
    return withTimeout(
      this.channelPromise,
      timeoutMs,
      () => new TransportUnavailableError(`broker not reachable within ${timeoutMs} ms`),
    );
  }

  private async openSharedChannel(): Promise<ConfirmChannel> {
    const model = await this.connectModel();
    let ch: ConfirmChannel;
    try {
      ch = await model.createConfirmChannel();
    } catch (err) {
      throw new TransportUnavailableError(`cannot open channel: ${(err as Error).message}`, {
        cause: err,
      });
    }
    if (this.closed) {
      await ch.close().catch(() => {});
      throw new TransportUnavailableError('connection closed');
    }
    const state: ChannelState = { returned: new Map(), closeReason: undefined };
    this.states.set(ch, state);
    // Returns arrive before the confirm of the same message: publishers look them up by id in
    // their confirm callback (`takeReturn`).
    ch.on('return', (msg: Message) => {
      const id = msg.properties.messageId as string | undefined;
      const f = msg.fields as unknown as {
        replyCode?: number;
        replyText?: string;
        routingKey: string;
      };
      if (id) state.returned.set(id, `${f.replyCode} ${f.replyText} (routing key ${f.routingKey})`);
    });
    ch.on('error', (err: Error) => {
      state.closeReason = err.message;
      this.logger?.warn('amqp channel error', { error: err.message });
    });
    ch.on('close', () => {
      if (this.channel === ch) this.channel = undefined;
    });
    this.channel = ch;
    return ch;
  }

  /** Why the broker closed this channel, if it said (e.g. `404 NOT_FOUND - no exchange`). */
  closeReason(ch: ConfirmChannel): string | undefined {
    return this.states.get(ch)?.closeReason;
  }

  /** The `basic.return` recorded for this message id on this channel, removed as it is read. */
  takeReturn(ch: ConfirmChannel, messageId: string): string | undefined {
    const returned = this.states.get(ch)?.returned;
    const why = returned?.get(messageId);
    if (why !== undefined) returned?.delete(messageId);
    return why;
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

  /** Drops the shared channel (e.g. after a confirm timeout left it in an unknown state). */
  async resetChannel(): Promise<void> {
    const ch = this.channel;
    this.channel = undefined;
    await ch?.close().catch(() => {});
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.resetChannel();
    const model =
      this.model ??
      (this.modelPromise ? await this.modelPromise.catch(() => undefined) : undefined);
    await model?.close().catch(() => {});
  }
}
