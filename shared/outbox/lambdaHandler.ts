import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { Context, ScheduledEvent } from 'aws-lambda';
import type { Logger } from '../logger.js';
import { type DrainEvent, isDrainEvent, isKickEvent, type KickEvent } from './kick.js';
import { type DrainResult, emptyDrainResult, type OutboxRelay } from './OutboxRelay.js';
import { type RelayStateStore, type SweepPolicy, sweepDue } from './relayState.js';

export interface OutboxRelayHandlerOptions {
  /** How long one invocation keeps draining (ms), at most the time left minus `safetyMarginMs`. */
  drainBudgetMs: number;
  /** Idle wait between rounds that found less than a full batch. */
  idleWaitMs: number;
  /** Relay loops per outbox (each holds one database connection while it works). */
  concurrency?: number;
  safetyMarginMs?: number;
  /**
   * The deployed design (docs/outbox-relay.md): a kicked invocation drains until no row came for
   * `lingerMs`; a scheduled one is a tick that reads the outboxes only when `sweep` says so. Unset:
   * every invocation drains for its whole budget (the local `dev` schedule).
   */
  kicked?: { lingerMs: number; sweep: SweepPolicy; state: RelayStateStore };
}

/**
 * What one invocation did: per outbox table (`T`, the service's table names) its drain, or
 * nothing when a tick left the database alone.
 */
export type RelaySummary<T extends string = string> = Partial<Record<T, DrainResult>> & {
  /**
   * `kick`, `sweep`, `tick` (heartbeat only) or `drain`: an operator's drain event (deployed: read
   * both outboxes until the linger, like a sweep that is always due), or any invocation without
   * the deployed design (the whole budget).
   */
  mode?: RelayMode;
};

/** How an invocation ran (`RelaySummary.mode`). */
export type RelayMode = 'kick' | 'sweep' | 'tick' | 'drain';

/**
 * The outbox relay's Lambda handler, around the service's relays (one per outbox table). Deployed, it is invoked two ways: asynchronously right after a
 * producer's COMMIT (a kick: drain while rows come, stop after a short linger), and by a 1-minute
 * schedule whose tick publishes the heartbeat without touching the database unless rows were left
 * or a quiet pipeline's periodic sweep is due (the guarantee for a lost kick). Overlapping
 * invocations are safe: rows are claimed with FOR UPDATE SKIP LOCKED.
 */
export function relayLambdaHandler<T extends string = string>(
  deps: {
    relays: OutboxRelay[];
    logger: Logger;
    prepare?: () => Promise<void>;
    /**
     * Called after each invocation (CloudWatch metrics): `readOutboxes` says whether this one read
     * the outboxes (then the backlog gauges may be queried). Returns the total backlog if known.
     */
    report?: (results: DrainResult[], readOutboxes: boolean) => Promise<unknown>;
  },
  options: OutboxRelayHandlerOptions,
) {
  let prepared: Promise<void> | undefined;
  const log = deps.logger;
  return middy<ScheduledEvent | KickEvent | DrainEvent, RelaySummary<T>>()
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .handler(async (event: ScheduledEvent | KickEvent | DrainEvent, context: Context) => {
      const kicked = options.kicked;
      let mode: RelayMode = 'drain';
      if (kicked) {
        if (isKickEvent(event)) mode = 'kick';
        else if (isDrainEvent(event)) mode = 'drain';
        else {
          const state = await kicked.state.get().catch((err: unknown) => {
            log.warn('relay state unreadable: sweeping', { error: String(err) });
            return undefined;
          });
          mode = sweepDue(state, Date.now(), kicked.sweep) ? 'sweep' : 'tick';
        }
      }
      let results: DrainResult[] = deps.relays.map(() => emptyDrainResult());
      if (mode !== 'tick') {
        // e.g. declaring the topology: once per container, retried on the next invocation if it failed
        prepared ??= (deps.prepare?.() ?? Promise.resolve()).catch((err) => {
          prepared = undefined;
          throw err;
        });
        await prepared.catch(async (err: unknown) => {
          // the broker did not answer: rows may be left, so the next tick sweeps
          if (kicked) {
            const now = Date.now();
            const previous = await kicked.state.get().catch(() => undefined);
            await kicked.state
              .put({
                lastCheckAt: previous?.lastCheckAt ?? now,
                lastActivityAt: previous?.lastActivityAt ?? now,
                pending: true,
              })
              .catch(() => {});
          }
          throw err;
        });
        const budgetMs = Math.max(
          0,
          Math.min(
            options.drainBudgetMs,
            context.getRemainingTimeInMillis() - (options.safetyMarginMs ?? 5_000),
          ),
        );
        results = await Promise.all(
          deps.relays.map((relay) =>
            relay.drain({
              budgetMs,
              idleWaitMs: options.idleWaitMs,
              concurrency: options.concurrency ?? 1,
              ...(kicked ? { lingerMs: kicked.lingerMs } : {}),
            }),
          ),
        );
      }
      // A look at the routes after the last round (its publish, or the previous invocation's
      // report) may have found a route lost: its rows go back now, not at the next kick. A tick
      // touches the database for it, and leaves the rows to the next tick's sweep (pending).
      for (let i = 0; i < deps.relays.length; i++) {
        const relay = deps.relays[i] as OutboxRelay;
        const result = results[i] as DrainResult;
        try {
          result.republished += await relay.republishLost();
        } catch (err) {
          log.warn('relay: rows of a lost route not put back yet', {
            table: relay.store.table,
            error: (err as Error).message,
          });
        }
      }
      const summary: RelaySummary<T> = { mode } as RelaySummary<T>;
      deps.relays.forEach((relay, i) => {
        (summary as Record<string, unknown>)[relay.store.table] = results[i] as DrainResult;
      });
      const backlog = await deps
        .report?.(results, mode !== 'tick')
        .catch((err) => log.warn('relay metrics not published', { error: (err as Error).message }));
      if (kicked && mode !== 'tick') {
        const now = Date.now();
        const previous = await kicked.state.get().catch(() => undefined);
        const published = results.some((r) => r.published > 0);
        await kicked.state
          .put({
            lastCheckAt: now,
            lastActivityAt: mode === 'kick' || published ? now : (previous?.lastActivityAt ?? now),
            // rows due later, or a run that could not tell (broker or database down)
            pending:
              typeof backlog !== 'number' ||
              backlog > 0 ||
              results.some((r) => r.roundErrors > 0 || r.brokerUnavailableRounds > 0),
          })
          .catch((err: unknown) => log.warn('relay state not stored', { error: String(err) }));
      }
      if (kicked && mode === 'tick' && results.some((r) => r.republished > 0)) {
        const previous = await kicked.state.get().catch(() => undefined);
        const now = Date.now();
        await kicked.state
          .put({
            lastCheckAt: previous?.lastCheckAt ?? now,
            lastActivityAt: previous?.lastActivityAt ?? now,
            pending: true,
          })
          .catch((err: unknown) => log.warn('relay state not stored', { error: String(err) }));
      }
      log.info('relay invocation done', { summary });
      return summary;
    });
}
