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
  /**
   * Largest encoded envelope (bytes) the relay hands to the publisher; a larger row is set aside
   * (needs attention) instead of failing every batch it is in. Default `DEFAULT_MAX_MESSAGE_BYTES`.
   */
  maxMessageBytes?: number;
}

/**
 * The smallest message limit of the deployed transports, less room for headers and attributes:
 * Amazon MQ for RabbitMQ 4 defaults `max_message_size` to 524,288 bytes, SQS takes 1 MiB
 * (docs/aws-facts.md). The envelopes of this pipeline are well under 1 KiB.
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 512 * 1024 - 8 * 1024;

export interface RoundResult {
  /** Rows this round locked, the set-aside ones included. */
  claimed: number;
  published: number;
  failed: number;
  /** Rows that left the batches this round: attempt limit reached, or set aside. */
  needsAttention: number;
  /** Rows that cannot be published (invalid, too large): taken out of the batches with their reason. */
  setAside: number;
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
  /**
   * Stop once no loop has claimed a row for this long (ms): the deployed relay drains while rows
   * come, then ends (a kicked or sweeping invocation). Unset: run for the whole budget.
   */
  lingerMs?: number;
}

export interface DrainResult {
  rounds: number;
  published: number;
  failed: number;
  needsAttention: number;
  setAside: number;
  brokerUnavailableRounds: number;
  /** Rounds that threw (database trouble, a bug, an injected fault); retried within the budget. */
  roundErrors: number;
}

/** A drain that did nothing (every count 0). */
export function emptyDrainResult(): DrainResult {
  return {
    rounds: 0,
    published: 0,
    failed: 0,
    needsAttention: 0,
    setAside: 0,
    brokerUnavailableRounds: 0,
    roundErrors: 0,
  };
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
  private readonly maxMessageBytes: number;

  constructor(
    private readonly deps: { db: SqlDatabase; publisher: Publisher; logger?: Logger },
    private readonly options: OutboxRelayOptions,
  ) {
    this.store = new OutboxStore(options.table);
    this.retryBaseMs = options.retryBaseMs ?? 1_000;
    this.retryMaxMs = options.retryMaxMs ?? 300_000;
    this.readyTimeoutMs = options.readyTimeoutMs ?? 2_000;
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  }

  async runOnce(): Promise<RoundResult> {
    const empty: RoundResult = {
      claimed: 0,
      published: 0,
      failed: 0,
      needsAttention: 0,
      setAside: 0,
      brokerUnavailable: false,
    };
    // Nothing due: no readiness check, no transaction. A lingering or ticking relay mostly finds an
    // empty outbox; this makes each such round one statement instead of a broker call and three
    // (on the Data API: BeginTransaction, ExecuteStatement, CommitTransaction).
    if (!(await this.store.hasClaimable(this.deps.db))) return empty;
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
      const { rows, setAside } = await this.store.claimBatch(tx, this.options.batchSize, {
        maxMessageBytes: this.maxMessageBytes,
      });
      if (setAside.length > 0) {
        this.deps.logger?.error('relay: rows set aside, they cannot be published', {
          table: this.options.table,
          rows: setAside,
        });
      }
      if (rows.length === 0)
        return { ...empty, claimed: setAside.length, setAside: setAside.length };
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
        claimed: rows.length + setAside.length,
        published: confirmed.length,
        failed: failures.length,
        needsAttention: needsAttention + setAside.length,
        setAside: setAside.length,
        brokerUnavailable: false,
      };
    });
  }

  /** Runs rounds until the budget is spent (or idle, or aborted). */
  async drain(options: DrainOptions): Promise<DrainResult> {
    const total = emptyDrainResult();
    const until = Date.now() + options.budgetMs;
    // shared by the loops: the last time any of them claimed a row
    let lastClaimAt = Date.now();
    const lingered = () =>
      options.lingerMs !== undefined && Date.now() - lastClaimAt >= options.lingerMs;
    const loop = async (index: number) => {
      let unavailableStreak = 0;
      let errorStreak = 0;
      while (Date.now() < until && !options.signal?.aborted) {
        let round: RoundResult;
        try {
          round = await this.runOnce();
        } catch (err) {
          // Database trouble (or an injected fault): log, count (RelayRoundErrors), wait, try
          // again within the budget.
          errorStreak++;
          total.roundErrors++;
          this.deps.logger?.error('relay round failed', {
            table: this.options.table,
            error: (err as Error).message,
          });
          if (lingered()) return;
          await this.pause(backoffDelay(errorStreak, 200, 5_000), until, options.signal);
          continue;
        }
        errorStreak = 0;
        total.rounds++;
        total.published += round.published;
        total.failed += round.failed;
        total.needsAttention += round.needsAttention;
        total.setAside += round.setAside;
        if (round.brokerUnavailable) {
          total.brokerUnavailableRounds++;
          unavailableStreak++;
          // rows are left: the relay's state says so, and the next scheduled tick sweeps again
          if (lingered()) return;
          await this.pause(backoffDelay(unavailableStreak, 200, 5_000), until, options.signal);
          continue;
        }
        unavailableStreak = 0;
        if (round.claimed > 0) lastClaimAt = Date.now();
        if (round.claimed < this.options.batchSize) {
          if (options.stopWhenIdle && round.claimed === 0) return;
          if (lingered()) return;
          // lingering, one loop is enough to see the next rows come
          if (options.lingerMs !== undefined && round.claimed === 0 && index > 0) return;
          await this.pause(options.idleWaitMs, until, options.signal);
        }
      }
    };
    await Promise.all(Array.from({ length: options.concurrency ?? 1 }, (_, i) => loop(i)));
    return total;
  }

  private async pause(ms: number, until: number, signal?: AbortSignal): Promise<void> {
    const wait = Math.max(0, Math.min(ms, until - Date.now()));
    if (wait === 0) return;
    await sleep(wait, undefined, { signal }).catch(() => {});
  }
}
