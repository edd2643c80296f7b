import { fault } from '../config/faults.js';
import type { SqlDatabase } from '../db/types.js';
import type { Logger } from '../logger.js';
import type { Publisher, RouteLoss } from '../port/types.js';
import { backoffDelay, sleep } from '../util/async.js';
import { OutboxStore, type PublishFailure } from './OutboxStore.js';

export interface OutboxRelayOptions {
  table: string;
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
  /**
   * How far below the oldest row of its last claim the relay's next claims start (ms, default
   * `DEFAULT_CLAIM_MARGIN_MS`): between full claims, a claim reads only rows with `occurred_at` at
   * or after that bound. The margin must cover the time from building an event's envelope
   * (`occurred_at`, the producer's clock, inside its transaction) to its COMMIT, plus the skew
   * between producers' clocks: a row that becomes visible later than that after its `occurred_at`
   * is older than the bound and waits for the next full claim (at most `fullClaimEveryMs`).
   */
  claimMarginMs?: number;
  /**
   * A claim without the bound at least this often (ms, default `DEFAULT_FULL_CLAIM_EVERY_MS`); also
   * the first claim of a relay and of each drain. It picks up the rows the bound skips: a retry
   * that came due, a row that committed late, a batch another relay rolled back. 0: every claim in
   * full (the claim before the bound).
   */
  fullClaimEveryMs?: number;
  /**
   * A claim's result in bytes (default `DEFAULT_MAX_CLAIM_BYTES`; never more than three quarters
   * of the database's response limit, `SqlDatabase.resultLimits`): a claim takes rows oldest first
   * while their size stays within it, always at least one, so large rows make smaller batches
   * instead of a result the database cannot return. A row larger than the database returns at
   * all (the Data API: 64 KB) is set aside.
   */
  maxClaimBytes?: number;
}

/**
 * The default `claimMarginMs`. A producer builds its envelope inside its transaction, a statement
 * or two before its COMMIT: milliseconds, tens on the Data API; 2 s leaves room for a lock wait or
 * a slow commit. A longer one delays the row (to the next full claim), never loses it.
 */
export const DEFAULT_CLAIM_MARGIN_MS = 2_000;

/**
 * The default `fullClaimEveryMs`: the longest a row below the bound waits for its claim (once due).
 * A full claim steps over every index entry of the rows published since the horizon was pinned,
 * when a session pins it (docs/performance.md, "Pinned horizon"): rare enough that the relay pays
 * it once per period, not once per round.
 */
export const DEFAULT_FULL_CLAIM_EVERY_MS = 10_000;

/**
 * The smallest message limit of the deployed transports, less room for headers and attributes:
 * Amazon MQ for RabbitMQ 4 defaults `max_message_size` to 524,288 bytes, SQS takes 1 MiB
 * (docs/aws-facts.md). The envelopes of this pipeline are well under 1 KiB.
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 512 * 1024 - 8 * 1024;

/**
 * The default `maxClaimBytes`: three quarters of the RDS Data API's 1 MiB response
 * (docs/aws-facts.md). The claim sizes each row as the JSON of its values plus a generous framing
 * (`CLAIM_ROW_FRAMING_BYTES`); the quarter left covers the response's column metadata and any
 * escaping the service adds beyond JSON's. The same bound on node-postgres keeps a round's memory
 * small; the events of this pipeline (under 1 KiB) fill a batch of 500 well within it.
 */
export const DEFAULT_MAX_CLAIM_BYTES = 768 * 1024;

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
  /** Published rows put back before the claim because a lost route may have swallowed them. */
  republished: number;
  /**
   * The claim stopped at its bound (rows or bytes), not at the end of the due rows: more may be
   * due now, and a drain goes on without waiting.
   */
  more: boolean;
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
  /** Published rows put back because a lost route may have swallowed them (`RoundResult`). */
  republished: number;
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
    republished: 0,
    roundErrors: 0,
  };
}

/** The relay's claims so far, by kind (for benchmarks and tests). */
export interface ClaimCounts {
  /** Claims without a bound on `occurred_at`. */
  full: number;
  /** Claims bounded at the oldest row of the relay's last claim less the margin. */
  bounded: number;
  /** Rounds begun bounded that found nothing there, then looked at the whole outbox. */
  widened: number;
}

/**
 * The outbox relay: claims due rows (FOR UPDATE SKIP LOCKED, oldest first), publishes them, and in
 * the same transaction marks `published_at` for the confirmed ones and charges an attempt with a
 * backoff to the others. The row locks are held while publishing, so concurrent relays never take
 * the same row in the same round. A crash after the confirm and before COMMIT leaves the rows
 * unpublished: they are published again (a duplicate with the same id, never a loss).
 *
 * The claim's bound: the relay remembers the oldest row of its last claim, and its next rounds
 * claim (and probe) only rows that occurred at most `claimMarginMs` before it, so that the index
 * scan starts at the queue's head instead of stepping over the entries of every row published
 * since the vacuum horizon was last able to move (docs/performance.md, "Pinned horizon"). A round
 * claims the whole outbox instead (a full claim) when it is the first of the relay or of a drain,
 * when `fullClaimEveryMs` passed since the last full claim, and after a round that found nothing;
 * and a round that finds nothing past the bound (nothing claimable there, or every such row locked
 * by another relay) looks at the whole outbox before it ends. So a row below the bound (a retry
 * that came due, a late COMMIT, a batch rolled back) is claimed by the next full claim, at most
 * `fullClaimEveryMs` after it is due, and at once when nothing else is waiting: a round reports
 * nothing claimed only when a look at the whole outbox found nothing to claim, as before the bound.
 */
export class OutboxRelay {
  readonly store: OutboxStore;
  private readonly retryBaseMs: number;
  private readonly retryMaxMs: number;
  private readonly readyTimeoutMs: number;
  private readonly maxMessageBytes: number;
  private readonly claimMarginMs: number;
  private readonly fullClaimEveryMs: number;
  private readonly maxClaimBytes: number;
  private readonly maxRowBytes: number | undefined;
  /**
   * Rows the next claim locks: the batch size, or fewer after a claim that stopped at its byte
   * bound (a little more than that claim took), so that large rows are not locked by the hundred
   * for a batch that takes a few dozen. It grows back when a claim takes all it locked.
   */
  private claimLimit: number;
  private readonly now: () => number;
  /** Lower bound (epoch ms) of the next bounded claim on `occurred_at`; undefined: claim in full. */
  private claimFrom: number | undefined;
  private lastFullClaimAt = Number.NEGATIVE_INFINITY;
  readonly claimCounts: ClaimCounts = { full: 0, bounded: 0, widened: 0 };

  constructor(
    private readonly deps: {
      db: SqlDatabase;
      publisher: Publisher;
      logger?: Logger;
      /** The clock of the full-claim period (tests). Default `Date.now`. */
      now?: () => number;
    },
    private readonly options: OutboxRelayOptions,
  ) {
    this.store = new OutboxStore(options.table);
    this.retryBaseMs = options.retryBaseMs ?? 1_000;
    this.retryMaxMs = options.retryMaxMs ?? 300_000;
    this.readyTimeoutMs = options.readyTimeoutMs ?? 2_000;
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.claimMarginMs = options.claimMarginMs ?? DEFAULT_CLAIM_MARGIN_MS;
    this.fullClaimEveryMs = options.fullClaimEveryMs ?? DEFAULT_FULL_CLAIM_EVERY_MS;
    const limits = deps.db.resultLimits;
    this.maxClaimBytes = Math.min(
      options.maxClaimBytes ?? DEFAULT_MAX_CLAIM_BYTES,
      limits ? Math.floor((limits.maxResponseBytes * 3) / 4) : Number.POSITIVE_INFINITY,
    );
    this.maxRowBytes = limits?.maxRowBytes;
    this.claimLimit = options.batchSize;
    this.now = deps.now ?? Date.now;
    for (const [name, v] of [
      ['claimMarginMs', this.claimMarginMs],
      ['fullClaimEveryMs', this.fullClaimEveryMs],
    ] as const) {
      if (!Number.isFinite(v) || v < 0)
        throw new RangeError(`${name}: ${v} is not a duration in ms`);
    }
    if (!Number.isSafeInteger(this.maxClaimBytes) || this.maxClaimBytes <= 0)
      throw new RangeError(
        `maxClaimBytes: ${this.maxClaimBytes} is not a positive number of bytes`,
      );
  }

  /** The bound the next bounded claim would use, or undefined: the next claim is a full one. */
  get claimBound(): Date | undefined {
    return this.claimFrom === undefined ? undefined : new Date(this.claimFrom);
  }

  /** The bound of a round beginning now, or undefined: this round claims in full. */
  private boundForRound(): Date | undefined {
    if (
      this.claimFrom === undefined ||
      this.now() - this.lastFullClaimAt >= this.fullClaimEveryMs
    ) {
      return undefined;
    }
    return new Date(this.claimFrom);
  }

  /** After a claim: the next bound is its oldest row less the margin (none found: a full claim next). */
  private claimed(bound: Date | undefined, oldest: Date | undefined): void {
    if (bound === undefined) {
      this.claimCounts.full++;
      this.lastFullClaimAt = this.now();
    } else {
      this.claimCounts.bounded++;
    }
    this.claimFrom = oldest === undefined ? undefined : oldest.getTime() - this.claimMarginMs;
  }

  /**
   * Puts back the published rows a lost route may have swallowed (docs/design.md §4, "Missing
   * routes"): the losses the publisher's route check recorded, each a window of markings and the
   * event types that needed the route. Logged; no I/O when there are none. A failed statement
   * gives the losses not done back to the publisher and throws (the next round tries again).
   * The rows are older than the claim's bound: the next claim is a full one.
   */
  async republishLost(): Promise<number> {
    const losses = this.deps.publisher.takeRouteLosses?.() ?? [];
    let total = 0;
    for (let i = 0; i < losses.length; i++) {
      const loss = losses[i] as RouteLoss;
      let rows: number;
      try {
        rows = await this.store.republish(this.deps.db, loss);
      } catch (err) {
        this.deps.publisher.returnRouteLosses?.(losses.slice(i));
        throw err;
      }
      total += rows;
      const fields = {
        table: this.options.table,
        rows,
        reason: loss.reason,
        markedFrom: loss.from.toISOString(),
        markedTo: loss.to.toISOString(),
      };
      if (rows > 0) {
        this.deps.logger?.warn('relay: republishing rows a lost route may have swallowed', fields);
      } else {
        this.deps.logger?.info('relay: a lost route, no row marked in its window', fields);
      }
    }
    if (total > 0) this.claimFrom = undefined;
    return total;
  }

  async runOnce(): Promise<RoundResult> {
    const republished = await this.republishLost();
    const empty: RoundResult = {
      claimed: 0,
      published: 0,
      failed: 0,
      needsAttention: 0,
      setAside: 0,
      brokerUnavailable: false,
      republished,
      more: false,
    };
    // Nothing due: no readiness check, no transaction. A lingering or ticking relay mostly finds an
    // empty outbox; this makes each such round one statement instead of a broker call and three
    // (on the Data API: BeginTransaction, ExecuteStatement, CommitTransaction). After an empty
    // round the next one is a full claim, so that an idle relay's rounds stay one statement each.
    let bound = this.boundForRound();
    let due = await this.store.hasClaimable(this.deps.db, { occurredFrom: bound });
    if (!due && bound !== undefined) {
      // nothing past the bound: a row below it may be due (a retry, a late COMMIT)
      bound = undefined;
      this.claimCounts.widened++;
      due = await this.store.hasClaimable(this.deps.db);
    }
    if (!due) {
      this.claimFrom = undefined;
      return empty;
    }
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
      let more = false;
      const claim = async (occurredFrom: Date | undefined) => {
        const limit = this.claimLimit;
        const claimed = await this.store.claimBatch(tx, limit, {
          maxMessageBytes: this.maxMessageBytes,
          occurredFrom,
          maxBytes: this.maxClaimBytes,
          ...(this.maxRowBytes !== undefined ? { maxRowBytes: this.maxRowBytes } : {}),
        });
        const taken = claimed.rows.length + claimed.setAside.length;
        more = claimed.truncated || taken >= limit;
        if (claimed.truncated) {
          this.claimLimit = Math.min(this.options.batchSize, Math.ceil(taken * 1.25) + 1);
        } else if (taken >= limit) {
          this.claimLimit = Math.min(this.options.batchSize, limit * 2);
        }
        return claimed;
      };
      let result = await claim(bound);
      if (bound !== undefined && result.oldestOccurredAt === undefined) {
        // every row past the bound went to another relay (or since the probe): the whole outbox
        this.claimed(bound, undefined);
        bound = undefined;
        this.claimCounts.widened++;
        result = await claim(undefined);
      }
      this.claimed(bound, result.oldestOccurredAt);
      const { rows, setAside } = result;
      if (setAside.length > 0) {
        this.deps.logger?.error('relay: rows set aside, they cannot be published', {
          table: this.options.table,
          rows: setAside,
        });
      }
      if (rows.length === 0)
        return { ...empty, claimed: setAside.length, setAside: setAside.length, more };
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
        republished,
        more,
      };
    });
  }

  /** Runs rounds until the budget is spent (or idle, or aborted). */
  async drain(options: DrainOptions): Promise<DrainResult> {
    const total = emptyDrainResult();
    // each drain (an invocation) begins with a full claim
    this.claimFrom = undefined;
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
        total.republished += round.republished;
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
        if (!round.more) {
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
