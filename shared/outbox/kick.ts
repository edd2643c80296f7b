import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import type middy from '@middy/core';
import type { Logger } from '../logger.js';

/** The payload of a kick: what the relay handler tells apart from its scheduled tick. */
export const KICK_SOURCE = 'outbox-kick';
export interface KickEvent {
  source: typeof KICK_SOURCE;
  /** Who kicked (the function's name), for the relay's log. */
  from: string;
}
export const isKickEvent = (event: unknown): event is KickEvent =>
  typeof event === 'object' && event !== null && (event as KickEvent).source === KICK_SOURCE;

/**
 * The payload of an operator's drain (`cli relay drain`, a synchronous invocation): read both
 * outboxes now, whatever the relay's state says, like a sweep that is always due. Any other event
 * (the schedule's, or an empty one) is a tick.
 */
export const DRAIN_SOURCE = 'outbox-drain';
export interface DrainEvent {
  source: typeof DRAIN_SOURCE;
  /** Who asked, for the relay's log. */
  from?: string;
}
export const isDrainEvent = (event: unknown): event is DrainEvent =>
  typeof event === 'object' && event !== null && (event as DrainEvent).source === DRAIN_SOURCE;

/**
 * Wakes the outbox relay after a commit that wrote outbox rows. Best effort: never throws, and the
 * rows do not depend on it (the relay's scheduled sweep finds whatever a lost kick left).
 */
export interface OutboxKick {
  kick(): Promise<void>;
}

export const noKick: OutboxKick = { kick: async () => {} };

/**
 * The kick as deployed: an asynchronous invocation of the relay function (`InvocationType:
 * Event`: Lambda queues it and answers 202; Lambda DG, "Invoking a Lambda function
 * asynchronously"), at most one per `minIntervalMs` from this container, bounded by `timeoutMs`.
 * A kick skipped by the interval is covered by the relay the previous kick started: it keeps
 * draining until no row came for its linger, which is longer than the interval.
 */
export class LambdaOutboxKick implements OutboxKick {
  /** Sent, skipped (interval) and failed kicks of this container. */
  readonly stats = { sent: 0, skipped: 0, failed: 0 };
  private last = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly deps: { client: LambdaClient; logger?: Logger | undefined },
    private readonly options: {
      functionName: string;
      from: string;
      minIntervalMs: number;
      timeoutMs?: number;
    },
  ) {}

  async kick(): Promise<void> {
    const now = Date.now();
    if (now - this.last < this.options.minIntervalMs) {
      this.stats.skipped++;
      return;
    }
    this.last = now;
    const payload: KickEvent = { source: KICK_SOURCE, from: this.options.from };
    try {
      await this.deps.client.send(
        new InvokeCommand({
          FunctionName: this.options.functionName,
          InvocationType: 'Event',
          Payload: new TextEncoder().encode(JSON.stringify(payload)),
        }),
        { abortSignal: AbortSignal.timeout(this.options.timeoutMs ?? 1_000) },
      );
      this.stats.sent++;
    } catch (err) {
      this.stats.failed++;
      // the next kick may go at once
      this.last = Number.NEGATIVE_INFINITY;
      this.deps.logger?.warn('relay kick failed: the scheduled sweep will publish the rows', {
        error: (err as Error).message,
      });
    }
  }
}

/**
 * Kicks the relay after the handler (its transactions committed), when `when` says the invocation
 * may have written outbox rows. Runs on errors too: a batch that failed part-way may have committed
 * some effects.
 */
export function outboxKick<E, R>(options: {
  kick: OutboxKick;
  when?: (request: middy.Request<E, R>) => boolean;
}): middy.MiddlewareObj<E, R> {
  const after = async (request: middy.Request<E, R>) => {
    if (options.when && !options.when(request)) return;
    await options.kick.kick();
  };
  return { after, onError: after };
}
