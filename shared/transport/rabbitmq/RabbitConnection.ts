import amqp, { type ConfirmChannel, type RecoveringChannelModel } from 'amqplib';
import type { Logger } from '../../logger.js';
import { TransportUnavailableError } from '../../port/errors.js';
import { withTimeout } from '../../util/async.js';
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
  /**
   * How long a connection must have stayed up for the backoff to start again from
   * `initialReconnectDelayMs` (default 30 s). A broker that accepts and then drops the connection
   * (a load balancer, a broker closing it at once) keeps the backoff growing.
   */
  healthyAfterMs?: number;
  heartbeatSeconds?: number;
}

/** A connection that stayed up this long was healthy: the reconnect backoff starts over. */
export const HEALTHY_AFTER_MS = 30_000;

/** Declares what a process depends on (its queues, bindings, exchanges) on a fresh connection. */
export type TopologyDeclarer = (ch: ConfirmChannel) => Promise<void>;

/**
 * One AMQP connection with bounded, jittered reconnects (amqplib's built-in recovery: one
 * reconnect loop per connection, exponential backoff capped at `maxReconnectDelayMs`, so a broker
 * outage never causes a reconnect storm). amqplib starts its backoff over on every successful
 * connect; ours starts over only once a connection stayed up `healthyAfterMs`, so a broker that
 * accepts and then drops every connection sees fewer and fewer attempts, not a steady stream.
 *
 * After every reconnect, the registered declarers (`declareOnConnect`) run before any channel is
 * handed out: a queue or exchange deleted while the process was disconnected exists again. The
 * first connection declares nothing (that is `prepare`'s job, at deploy or start), unless asked
 * to (`redeclare`).
 * Channels are opened by their owners (a publisher's `ConfirmedChannel`, a worker, an
 * inspection) and closed by them.
 */
export class RabbitConnection {
  private model: RecoveringChannelModel | undefined;
  private modelPromise: Promise<RecoveringChannelModel> | undefined;
  private closed = false;
  /** Reconnects since the last healthy connection (drives the backoff). */
  private failures = 0;
  private connectedAt: number | undefined;
  /** Connections made so far; the declarers last ran on connection `declaredFor`. */
  private generation = 0;
  private declaredFor = 1;
  private forced = false;
  private declaring: Promise<void> | undefined;
  private readonly declarers: TopologyDeclarer[] = [];
  /** Successful connects (the first one included). */
  connects = 0;

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
            maxRetries: Number.POSITIVE_INFINITY,
            // amqplib passes its own attempt count, which it resets on every connect: ours resets
            // only after a healthy connection (see 'disconnect' below).
            calculateDelay: () => this.nextDelay(),
          },
        },
      );
      model.on('error', (err) =>
        this.logger?.warn('amqp connection error', { error: err.message }),
      );
      model.on('disconnect', (err) => {
        // Emitted before amqplib asks for the next delay.
        const upMs = this.connectedAt === undefined ? 0 : Date.now() - this.connectedAt;
        if (upMs >= (this.options.healthyAfterMs ?? HEALTHY_AFTER_MS)) this.failures = 0;
        this.connectedAt = undefined;
        this.logger?.warn('amqp disconnected', { error: err?.message, upMs });
      });
      model.on('reconnect-scheduled', ({ attempt, delay }) =>
        this.logger?.info('amqp reconnect scheduled', { attempt, delayMs: delay }),
      );
      model.on('connect', () => {
        this.connectedAt = Date.now();
        this.generation++;
        this.connects++;
        this.logger?.info('amqp connected', { connection: this.generation });
      });
      this.model = model;
      return model;
    })().catch((err: unknown) => {
      // e.g. the credentials could not be read: the next call tries again
      this.modelPromise = undefined;
      throw err;
    });
    return this.modelPromise;
  }

  /** The delay before the next connection attempt: base·2^(n−1), ±20 % jitter, capped. */
  private nextDelay(): number {
    this.failures++;
    const base = this.options.initialReconnectDelayMs ?? RABBITMQ_DEFAULTS.reconnectBaseMs;
    const max = this.options.maxReconnectDelayMs ?? RABBITMQ_DEFAULTS.reconnectMaxMs;
    const step = Math.min(max / 1.2, base * 2 ** Math.min(this.failures - 1, 30));
    return Math.round(step * (0.8 + Math.random() * 0.4));
  }

  /**
   * Registers what this process depends on, declared after every reconnect before channels are
   * handed out. Declaring is idempotent. A declarer that fails (e.g. a user without `configure`
   * permission) is logged, not fatal.
   */
  declareOnConnect(declarer: TopologyDeclarer): void {
    this.declarers.push(declarer);
  }

  /** Declares the topology again before the next channel (e.g. the broker cancelled a consumer). */
  redeclare(): void {
    this.forced = true;
  }

  private async declared(model: RecoveringChannelModel, timeoutMs: number): Promise<void> {
    const due = () => this.forced || this.declaredFor < this.generation;
    while (this.declarers.length > 0 && due() && !this.closed) {
      this.declaring ??= (async () => {
        // rawChannel waits for the connection: `generation` is the one declared on
        const first = await this.rawChannel(model, timeoutMs);
        const generation = this.generation;
        this.forced = false;
        let ch: ConfirmChannel | undefined = first;
        for (const declare of this.declarers) {
          ch ??= await this.rawChannel(model, timeoutMs);
          try {
            await declare(ch);
          } catch (err) {
            this.logger?.warn('amqp topology not declared', { error: (err as Error).message });
          } finally {
            await ch.close().catch(() => {});
            ch = undefined;
          }
        }
        this.declaredFor = generation;
      })().finally(() => {
        this.declaring = undefined;
      });
      await this.declaring;
    }
  }

  private async rawChannel(
    model: RecoveringChannelModel,
    timeoutMs: number,
  ): Promise<ConfirmChannel> {
    const ch = await withTimeout(
      model.createConfirmChannel(),
      timeoutMs,
      () => new TransportUnavailableError(`broker not reachable within ${timeoutMs} ms`),
      (late) => void late.close().catch(() => {}),
    );
    ch.on('error', (err: Error) => this.logger?.warn('amqp channel error', { error: err.message }));
    return ch;
  }

  /**
   * A new confirm channel owned by the caller (consumers: one for consuming, one for settling).
   * Waits at most `timeoutMs` for the broker (and, after a reconnect, for the declarers).
   */
  async openChannel(timeoutMs = 5_000): Promise<ConfirmChannel> {
    if (this.closed) throw new TransportUnavailableError('connection closed');
    const model = await this.connectModel();
    await this.declared(model, timeoutMs);
    return this.rawChannel(model, timeoutMs);
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
