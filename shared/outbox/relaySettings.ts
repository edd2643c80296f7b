// The relay's deployment settings: `OutboxRelayFunction` (`/cdk`) deploys with them; the core
// entry point exports them too, so that a configuration reads the defaults without loading the CDK.

/**
 * How the relay runs (docs/outbox-relay.md): kicked by the producers after COMMIT, each
 * invocation drains until no row came for `lingerMs` (at most `drainBudgetMs`); the 1-minute
 * schedule ticks, and sweeps the outboxes only after `sweepQuietMs` without traffic and
 * `sweepIntervalMs` after the last look (at once while rows are left).
 */
export interface RelaySettings {
  /** How long one invocation drains at most (below its timeout). */
  drainBudgetMs: number;
  /** The pause between two empty rounds while it lingers. */
  idleWaitMs: number;
  /** A kicked invocation stops this long after the last row it found. */
  lingerMs: number;
  /** The producers' kick interval (`RELAY_KICK_INTERVAL_MS`). */
  kickIntervalMs: number;
  /** A tick sweeps the outboxes only after this long without traffic… */
  sweepQuietMs: number;
  /** …and this long after its last look. */
  sweepIntervalMs: number;
  /**
   * Reserved concurrency; 0 (the default) leaves it unreserved, which deploys on any account (a
   * reservation needs the account's unreserved concurrency minus 100).
   */
  reservedConcurrency: number;
  /** Whether the producers kick the relay (false: the schedule alone). */
  kick: boolean;
}

/** What the relay runs with unless told otherwise (this repository's pipeline too). */
export const DEFAULT_RELAY_SETTINGS: Readonly<RelaySettings> = {
  // an invocation drains for at most 50 s of its 60 s timeout, and stops 3 s after the last row
  drainBudgetMs: 50_000,
  idleWaitMs: 100,
  // longer than the kick interval plus an invocation's start (a skipped kick is covered)
  lingerMs: 3_000,
  kickIntervalMs: 1_000,
  // no sweep while orders flow (kicked runs publish) nor within 10 min of the last: Aurora's
  // 300 s auto-pause window passes; then at most hourly
  sweepQuietMs: 600_000,
  sweepIntervalMs: 3_600_000,
  // unreserved: a reservation fails the deploy on an account whose unreserved concurrency is
  // below it + 100 (new accounts). With 2 (production, after the check in docs/operations.md):
  // 2 invocations × RELAY_CONCURRENCY loops × 2 outboxes, at most 8 transactions at once
  reservedConcurrency: 0,
  kick: true,
};
