import type { OutboxTable } from '../config/constants.js';
import type { SqlDatabase } from '../db/types.js';
import { fault } from '../faults.js';
import type { Logger } from '../logger.js';
import type { Publisher } from '../transport/types.js';
import { backoffDelay, sleep } from '../util/async.js';
import { OutboxStore, type PublishFailure } from './OutboxStore.js';

export interface OutboxRelayOptions {
  table: OutboxTable;
  /** Rows claimed and published per round. */
  batchSize: number;
  /** Failed publishes before a row needs attention. */
  maxAttempts: number;
  /** Row retry backoff: base·2^(attempt-1), full jitter, capped. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** How long a round waits for the broker before giving up without claiming rows. */
  readyTimeoutMs?: number;
}

export interface RoundResult {
  claimed: number;
  published: number;
  failed: number;
  needsAttention: number;
  /** The broker was unreachable: nothing was claimed, no row was charged an attempt. */
  brokerUnavailable: boolean;
}

export interface DrainOptions {
  /** Stop starting new rounds after this long (ms). */
  budgetMs: number;
  /** Wait after a round that found less than a full batch (ms). */
  idleWaitMs: number;
  /** Independent relay loops in this process (each with its own transaction). Default 1. */
  concurrency?: number;
  /** Stop early: when aborted, or after this many consecutive empty rounds (useful in tests). */
  signal?: AbortSignal;
  stopWhenIdle?: boolean;
}

export interface DrainResult {
  rounds: number;
  published: number;
  failed: number;
  needsAttention: number;
  brokerUnavailableRounds: number;
}

/**
 * The outbox relay: claims due rows (FOR UPDATE SKIP LOCKED, oldest first), publishes them, and in
 * the same transaction marks `published_at` for the confirmed ones and charges an attempt with a
 * backoff to the others. The row locks are held while publishing, so concurrent relays never take
 * the same row in the same round. A crash after the confirm and before COMMIT leaves the rows
 * unpublished: they are published again (a duplicate with the same id, never a loss).
 */
export class OutboxRelay {
  readonly store: OutboxStore;
  private readonly retryBaseMs: number;
  private readonly retryMaxMs: number;
  private readonly readyTimeoutMs: number;

  constructor(
    private readonly deps: { db: SqlDatabase; publisher: Publisher; logger?: Logger },
    private readonly options: OutboxRelayOptions,
  ) {
    this.store = new OutboxStore(options.table);
    this.retryBaseMs = options.retryBaseMs ?? 1_000;
    this.retryMaxMs = options.retryMaxMs ?? 300_000;
    this.readyTimeoutMs = options.readyTimeoutMs ?? 2_000;
  }

  async runOnce(): Promise<RoundResult> {
    const empty: RoundResult = {
      claimed: 0,
      published: 0,
      failed: 0,
      needsAttention: 0,
      brokerUnavailable: false,
    };
    try {
      await this.deps.publisher.ready(this.readyTimeoutMs);
    } catch (err) {
      this.deps.logger?.warn('relay: broker unavailable, not claiming rows', {
        table: this.options.table,
        error: (err as Error).message,
      });
      return { ...empty, brokerUnavailable: true };
    }
    return this.deps.db.transaction(async (tx) => {
      const rows = await this.store.claim(tx, this.options.batchSize);
      if (rows.length === 0) return empty;
      const outcomes = await this.deps.publisher.publish(rows.map((r) => r.envelope));
      fault('relay.after-publish');
      const confirmed: string[] = [];
      const failures: PublishFailure[] = [];
      for (let i = 0; i < outcomes.length; i++) {
        const outcome = outcomes[i];
        const row = rows[i];
        if (!outcome || !row) continue;
        if (outcome.ok) {
          confirmed.push(outcome.id);
        } else {
          failures.push({
            id: outcome.id,
            error: `${outcome.reason}: ${outcome.error}`,
            retryInMs: backoffDelay(row.attempts + 1, this.retryBaseMs, this.retryMaxMs),
          });
        }
      }
      await this.store.markPublished(tx, confirmed);
      const { needsAttention } = await this.store.markFailed(
        tx,
        failures,
        this.options.maxAttempts,
      );
      if (failures.length > 0) {
        this.deps.logger?.warn('relay: publishes failed', {
          table: this.options.table,
          failed: failures.length,
          needsAttention,
          firstError: failures[0]?.error,
        });
      }
      return {
        claimed: rows.length,
        published: confirmed.length,
        failed: failures.length,
        needsAttention,
        brokerUnavailable: false,
      };
    });
  }

  /** Runs rounds until the budget is spent (or idle, or aborted). */
  async drain(options: DrainOptions): Promise<DrainResult> {
    const total: DrainResult = {
      rounds: 0,
      published: 0,
      failed: 0,
      needsAttention: 0,
      brokerUnavailableRounds: 0,
    };
    const until = Date.now() + options.budgetMs;
    const loop = async () => {
      let unavailableStreak = 0;
      let errorStreak = 0;
      while (Date.now() < until && !options.signal?.aborted) {
        let round: RoundResult;
        try {
          round = await this.runOnce();
        } catch (err) {
          // Database trouble (or an injected fault): log, wait, try again within the budget.
          errorStreak++;
          this.deps.logger?.error('relay round failed', {
            table: this.options.table,
            error: (err as Error).message,
          });
          await this.pause(backoffDelay(errorStreak, 200, 5_000), until, options.signal);
          continue;
        }
        errorStreak = 0;
        total.rounds++;
        total.published += round.published;
        total.failed += round.failed;
        total.needsAttention += round.needsAttention;
        if (round.brokerUnavailable) {
          total.brokerUnavailableRounds++;
          unavailableStreak++;
          await this.pause(backoffDelay(unavailableStreak, 200, 5_000), until, options.signal);
          continue;
        }
        unavailableStreak = 0;
        if (round.claimed < this.options.batchSize) {
          if (options.stopWhenIdle && round.claimed === 0) return;
          await this.pause(options.idleWaitMs, until, options.signal);
        }
      }
    };
    await Promise.all(Array.from({ length: options.concurrency ?? 1 }, loop));
    return total;
  }

  private async pause(ms: number, until: number, signal?: AbortSignal): Promise<void> {
    const wait = Math.max(0, Math.min(ms, until - Date.now()));
    if (wait === 0) return;
    await sleep(wait, undefined, { signal }).catch(() => {});
  }
}
