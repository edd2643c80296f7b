import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { Context, ScheduledEvent } from 'aws-lambda';
import type { Logger } from '../../shared/logger.js';
import type { DrainResult, OutboxRelay } from '../../shared/outbox/OutboxRelay.js';

export interface OutboxRelayHandlerOptions {
  /** How long one invocation keeps draining (ms), at most the time left minus `safetyMarginMs`. */
  drainBudgetMs: number;
  /** Idle wait between rounds that found less than a full batch. */
  idleWaitMs: number;
  /** Relay loops per outbox (each holds one database connection while it works). */
  concurrency?: number;
  safetyMarginMs?: number;
}

export type RelaySummary = Record<string, DrainResult>;

/**
 * The relay for a 1-minute EventBridge schedule: instead of one round per minute (a minute of
 * lag), each invocation keeps draining every outbox for most of the minute with short idle waits,
 * so the lag from commit to publish stays well under a second. Overlapping invocations are safe:
 * rows are claimed with FOR UPDATE SKIP LOCKED.
 */
export function createOutboxRelayHandler(
  deps: {
    relays: OutboxRelay[];
    logger: Logger;
    prepare?: () => Promise<void>;
    /** Called after each invocation's drain (e.g. CloudWatch metrics of the backlog). */
    report?: (results: DrainResult[]) => Promise<void>;
  },
  options: OutboxRelayHandlerOptions,
) {
  let prepared: Promise<void> | undefined;
  return middy<ScheduledEvent, RelaySummary>()
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .handler(async (_event: ScheduledEvent, context: Context) => {
      // e.g. declaring the topology: once per container, retried on the next invocation if it failed
      prepared ??= (deps.prepare?.() ?? Promise.resolve()).catch((err) => {
        prepared = undefined;
        throw err;
      });
      await prepared;
      const budgetMs = Math.max(
        0,
        Math.min(
          options.drainBudgetMs,
          context.getRemainingTimeInMillis() - (options.safetyMarginMs ?? 5_000),
        ),
      );
      const results = await Promise.all(
        deps.relays.map((relay) =>
          relay.drain({
            budgetMs,
            idleWaitMs: options.idleWaitMs,
            concurrency: options.concurrency ?? 1,
          }),
        ),
      );
      const summary: RelaySummary = {};
      deps.relays.forEach((relay, i) => {
        summary[relay.store.table] = results[i] as DrainResult;
      });
      await deps
        .report?.(results)
        .catch((err) =>
          deps.logger.warn('relay metrics not published', { error: (err as Error).message }),
        );
      deps.logger.info('relay invocation done', { budgetMs, summary });
      return summary;
    });
}
