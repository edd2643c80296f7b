import type { ConfirmChannel, Message, Options } from 'amqplib';
import { TransportUnavailableError } from '../../port/errors.js';
import type { PublishFailureReason } from '../../port/types.js';
import type { RabbitConnection } from './RabbitConnection.js';

/** The fate of one publish: confirmed and routed, or why not. */
export type ConfirmResult =
  | { ok: true }
  | { ok: false; reason: PublishFailureReason; error: string };

export interface PublishProperties extends Options.Publish {
  messageId?: string;
}

interface Pending {
  key: string;
  resolve: (result: ConfirmResult) => void;
}

/**
 * The RabbitMQ backend's one publish primitive, used by the relay's publisher, the retry and park
 * copies and redrive: a confirm channel of its own on a connection, every message persistent and
 * `mandatory`, and each publish resolved with its outcome only once the broker confirmed it and
 * did not return it.
 *
 * A `basic.return` (no queue bound for the routing key) carries the message's properties: it is
 * matched to its publish by message id. RabbitMQ sends the return before the confirm of the same
 * message, so the confirm callback already knows. To keep that match exact, two publishes with the
 * same key (the same message id, or none) are never in flight at once: the second waits.
 *
 * The channel is opened on first use and again after it closed; a publish never rejects.
 */
export class ConfirmedChannel {
  private channel: ConfirmChannel | undefined;
  private opening: Promise<ConfirmChannel> | undefined;
  private closeReason: string | undefined;
  private readonly returned = new Map<string, string>();
  /** In-flight publishes by key, and publishes waiting for their key to be free. */
  private readonly inFlight = new Map<string, Promise<unknown>>();
  private drainWaiters: (() => void)[] = [];

  constructor(
    private readonly connection: RabbitConnection,
    private readonly options: { connectTimeoutMs?: number } = {},
  ) {}

  /** Opens the channel if needed; rejects with `TransportUnavailableError` within `timeoutMs`. */
  async ready(timeoutMs = this.options.connectTimeoutMs ?? 5_000): Promise<ConfirmChannel> {
    if (this.channel) return this.channel;
    this.opening ??= this.open(timeoutMs).finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }

  private async open(timeoutMs: number): Promise<ConfirmChannel> {
    const ch = await this.connection.openChannel(timeoutMs);
    ch.on('return', (msg: Message) => {
      const f = msg.fields as unknown as { replyCode?: number; replyText?: string };
      const key = msg.properties.messageId ?? '';
      this.returned.set(
        key,
        `${f.replyCode} ${f.replyText} (routing key ${(msg.fields as { routingKey: string }).routingKey})`,
      );
    });
    ch.on('error', (err: Error) => {
      if (this.channel === ch) this.closeReason = err.message;
    });
    ch.on('close', () => {
      if (this.channel === ch) this.channel = undefined;
      this.wakeDrain();
    });
    ch.on('drain', () => this.wakeDrain());
    this.closeReason = undefined;
    this.returned.clear();
    this.channel = ch;
    return ch;
  }

  private wakeDrain(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of waiters) w();
  }

  /**
   * Publishes one message, confirmed and routable, or says why not (`unroutable` for a return or a
   * missing exchange, `nacked`, `connection` when the channel could not be opened or died).
   * `written` resolves once the message is in the socket buffer, or the buffer drained: callers
   * that publish many at once wait on it before writing more.
   */
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    properties: PublishProperties,
    options: {
      /** Publish only on this channel: once it closed, fail at once rather than open another. */
      on?: ConfirmChannel;
    } = {},
  ): { confirmed: Promise<ConfirmResult>; written: Promise<void> } {
    const key = properties.messageId ?? '';
    let written!: () => void;
    const writtenPromise = new Promise<void>((resolve) => {
      written = resolve;
    });
    const confirmed = this.serialize(key, () =>
      options.on && options.on !== this.channel
        ? Promise.resolve(this.channelFailure())
        : this.publishNow(exchange, routingKey, content, properties, key, written),
    ).finally(() => written());
    return { confirmed, written: writtenPromise };
  }

  /** Runs `fn` once no other publish with `key` is in flight. */
  private serialize(key: string, fn: () => Promise<ConfirmResult>): Promise<ConfirmResult> {
    const before = this.inFlight.get(key);
    const run = before ? before.then(fn, fn) : fn();
    const tail = run.catch(() => {});
    this.inFlight.set(key, tail);
    void tail.then(() => {
      if (this.inFlight.get(key) === tail) this.inFlight.delete(key);
    });
    return run;
  }

  private async publishNow(
    exchange: string,
    routingKey: string,
    content: Buffer,
    properties: PublishProperties,
    key: string,
    written: () => void,
  ): Promise<ConfirmResult> {
    let ch: ConfirmChannel;
    try {
      ch = await this.ready();
    } catch (err) {
      const error = err instanceof TransportUnavailableError ? err.message : String(err);
      return { ok: false, reason: 'connection', error };
    }
    this.returned.delete(key);
    return new Promise<ConfirmResult>((resolve) => {
      const pending: Pending = { key, resolve };
      try {
        const ok = ch.publish(
          exchange,
          routingKey,
          content,
          { ...properties, persistent: true, mandatory: true },
          (err: unknown) => this.confirm(ch, pending, err),
        );
        if (ok) written();
        else this.drainWaiters.push(written);
      } catch (err) {
        // The channel was already closed when we published (IllegalOperationError).
        written();
        resolve(this.channelFailure((err as Error).message));
      }
    });
  }

  private confirm(ch: ConfirmChannel, p: Pending, err: unknown): void {
    const returnedWhy = this.returned.get(p.key);
    if (returnedWhy !== undefined) this.returned.delete(p.key);
    if (err) {
      // amqplib fails unconfirmed callbacks with 'channel closed' when the channel dies, and
      // with 'message nacked' for a basic.nack from the broker.
      const closed = this.channel !== ch;
      if ((err as Error).message === 'message nacked' && !closed) {
        p.resolve({ ok: false, reason: 'nacked', error: 'broker nacked the message' });
      } else {
        p.resolve(this.channelFailure());
      }
    } else if (returnedWhy !== undefined) {
      p.resolve({ ok: false, reason: 'unroutable', error: `returned: ${returnedWhy}` });
    } else {
      p.resolve({ ok: true });
    }
  }

  /** Why the last channel closed, as a publish failure (`unroutable` for a missing exchange). */
  channelFailure(detail?: string): ConfirmResult {
    const why = this.closeReason ?? detail ?? 'channel closed before the broker confirmed';
    // A channel closed by the broker with 404 means the exchange does not exist: nothing can route.
    const reason: PublishFailureReason = /NOT_FOUND|404/.test(why) ? 'unroutable' : 'connection';
    return { ok: false, reason, error: why };
  }

  /** Drops the channel (its state is unknown after a confirm timeout); reopened on next use. */
  async reset(): Promise<void> {
    const ch = this.channel;
    this.channel = undefined;
    this.wakeDrain();
    await ch?.close().catch(() => {});
  }
}
