/**
 * The library's core entry point (`reliable-messaging-serverless`): the envelope, the transport
 * port, the transactional outbox and its confirmed relay, the inbox and the consumer driver with its
 * retry policy, parking and redrive helpers, the SQL port and database logins, the configuration,
 * logging and the metrics the alarms watch. Each transport is a subpath of its own (`/rabbitmq`,
 * `/sqs`, `/nats`, `/memory`), as are the SQL adapters (`/pg`, `/data-api`) and the test helpers
 * (`/testing`), so that a Lambda bundle carries only the clients it uses.
 * docs/package.md lists the entry points; `api/` holds the reviewed report of each.
 */

// ─── Configuration: the retry budget, retention, the rules between settings ─────────────────
export { decideRetry, loadBudget, type RetryDecision, validateBudget } from './config/budget.js';
export {
  DEFAULT_REDRIVE_LIMIT,
  DEFAULT_REDRIVE_WINDOW_MS,
  DEFAULT_RETENTION,
  DEFAULT_RETRY_BUDGET,
  DEFAULT_TRANSACTION_TIMEOUTS,
  type Env,
  loadEnv,
  RETENTION_ENV,
  type Retention,
  type RetryBudget,
  retentionOf,
  type TransactionTimeouts,
  transactionTimeoutsOf,
} from './config/env.js';
export { ConfigError, InjectedFaultError } from './config/errors.js';
export { type FaultPoint, fault } from './config/faults.js';
export {
  comebackWindowMs,
  type InboxRetentionTerms,
  inboxRetentionRule,
  type TransactionBoundsTerms,
  transactionBoundsRule,
  VISIBILITY_TIMEOUT_FACTOR,
  visibilityTimeoutRule,
} from './config/rules.js';
// ─── Consuming: the inbox and its handler, the driver, the retry policy, parking ────────────
export { classifyError, isInfrastructureError, shortError } from './consumer/classify.js';
export { type DecodeRules, decodeMessage } from './consumer/decode.js';
export {
  type BatchReport,
  ConsumerDriver,
  type ConsumerDriverOptions,
  type DriverNotices,
  type ParkRefused,
} from './consumer/driver.js';
export { PermanentMessageError } from './consumer/errors.js';
export { INBOX_TABLE, Inbox } from './consumer/inbox.js';
export { InboxHandler, type InboxHandlerOptions, inboxHandler } from './consumer/inboxHandler.js';
export { Journal, type JournalEntry, type JournalSink } from './consumer/journal.js';
export { publishParkRefused } from './consumer/metrics.js';
export { matches, overRedriveLimit, pacer, redriveLimitReason } from './consumer/parking.js';
export { type PeekedEnvelope, peekEnvelope } from './consumer/peek.js';
export { DEFERRED_ERROR, RetryPolicy, type Setback, windowStart } from './consumer/retryPolicy.js';
export { runningWorkers, type Worker } from './consumer/workers.js';
// ─── The SQL port (adapters: `/pg`, `/data-api`) ────────────────────────────────────────────
export {
  ConstraintViolationError,
  DatabaseResumingError,
  DbError,
  TransientDbError,
  UniqueViolationError,
} from './db/errors.js';
export { type LibraryMigrationsOptions, libraryMigrations } from './db/libraryMigrations.js';
export {
  checkUsername,
  type DbLogin,
  ensureLogin,
  parseDbSecret,
  retireLogin,
} from './db/logins.js';
export { loadMigrations, type MigrateResult, type Migration, migrate } from './db/migrate.js';
export { databaseResumeReporter } from './db/resumeMetrics.js';
export { type DeadlineAware, isDeadlineAware } from './db/transactionBounds.js';
export type {
  QueryResult,
  ResultLimits,
  Row,
  SqlDatabase,
  SqlExecutor,
  SqlParam,
} from './db/types.js';
// ─── The envelope ───────────────────────────────────────────────────────────────────────────
export {
  CURRENT_SCHEMA_VERSION,
  decodeEnvelope,
  type Envelope,
  encodeEnvelope,
  envelopeSchema,
  type NewEvent,
  newEnvelope,
  parseEnvelope,
  SUPPORTED_SCHEMA_MAJORS,
  schemaMajor,
} from './envelope/envelope.js';
export { EnvelopeError } from './envelope/errors.js';
export { currentTraceId, newTraceId } from './envelope/trace.js';
export { createLogger, type Logger } from './logger.js';
// ─── The outbox and its relay ───────────────────────────────────────────────────────────────
export {
  isDrainEvent,
  isKickEvent,
  type KickEvent,
  LambdaOutboxKick,
  noKick,
  type OutboxKick,
  outboxKick,
} from './outbox/kick.js';
export {
  type OutboxRelayHandlerOptions,
  type RelayMode,
  type RelaySummary,
  relayLambdaHandler,
} from './outbox/lambdaHandler.js';
export { type InvocationCounts, publishOutboxMetrics } from './outbox/metrics.js';
export {
  type ClaimCounts,
  type DrainOptions,
  type DrainResult,
  OutboxRelay,
  type OutboxRelayOptions,
  type RoundResult,
} from './outbox/OutboxRelay.js';
export {
  type ClaimOptions,
  type ClaimResult,
  type NeedsAttentionRow,
  type OutboxRow,
  type OutboxStatus,
  OutboxStore,
  type PublishFailure,
  type SetAsideRow,
} from './outbox/OutboxStore.js';
export { DEFAULT_RELAY_SETTINGS, type RelaySettings } from './outbox/relaySettings.js';
export {
  MemoryRelayStateStore,
  type RelayState,
  type RelayStateStore,
  SsmRelayStateStore,
  type SweepPolicy,
  sweepDue,
} from './outbox/relayState.js';
// ─── The transport port and what a transport module provides ────────────────────────────────
export { TransportError, TransportUnavailableError } from './port/errors.js';
export type * from './port/types.js';
export { subscriptionOf } from './port/types.js';
export {
  type BackendBase,
  backendBaseSchema,
  type TransportModule,
  topologySchema,
} from './transport/module.js';
// ─── Derived ids: the same input gives the same id (a redelivery derives no new one) ────────
export { uuidV5 } from './util/uuid.js';
