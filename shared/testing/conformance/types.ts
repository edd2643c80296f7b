import type { RetryBudget } from '../../config/env.js';
import type { Migration } from '../../db/migrate.js';
import type { SqlDatabase, SqlExecutor } from '../../db/types.js';
import type { NewEvent } from '../../envelope/envelope.js';
import type { Logger } from '../../logger.js';
import type { MessageHandler } from '../../port/types.js';

/**
 * What a user gives the conformance kit: their handler and what it needs, in a module that exports
 * it as `default` or as `conformance`. The kit runs each scenario on a database and a broker
 * namespace of its own, and reads the handler's effects back through `effects`.
 */
export interface ConformanceSubject {
  /** The inbox consumer name its handler claims messages as (`processed_messages.consumer_name`). */
  consumer: string;
  /**
   * Its outbox tables: when given (even empty), the kit applies the library's tables first
   * (`libraryMigrations({ outboxes })`: the inbox and these outboxes), then `migrations()`.
   * Leave it out when `migrations()` creates the inbox itself.
   */
  outboxes?: readonly string[];
  /** Its own tables (and any rows its handler needs), applied in order on a fresh database. */
  migrations(): Promise<Migration[]> | Migration[];
  /**
   * Its handler on the database the kit gives it: the kit injects database faults through `db`,
   * so the handler must do all its work through it (and its effect through the transaction's
   * executor). `budget` is the retry budget of the scenario (short, so retries end quickly).
   */
  handler(deps: { db: SqlDatabase; budget: RetryBudget; logger?: Logger }): MessageHandler;
  /**
   * The i-th valid event of a run (i from 0): each one of a distinct aggregate, of a type the
   * handler handles. The kit builds the envelope (`newEnvelope`).
   */
  event(i: number): NewEvent;
  /** How many times each event's effect is in the database, by event id (lower case). */
  effects(db: SqlExecutor): Promise<Map<string, number>>;
}

/** The scenarios, in the order they run and report. */
export const SCENARIO_NAMES = [
  'duplicates',
  'ack-lost',
  'rollback-after-effect',
  'poison',
  'db-outage-short',
  'db-outage-long',
  'redelivery-storm',
  'killed-process',
  'frozen-process',
  'slow-past-lease',
  'reordering',
] as const;

/** A scenario of the kit (docs/conformance.md, "What it checks"). */
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

/**
 * Where the services are (the CLI reads them from the environment: `DATABASE_URL`, `AMQP_URL`,
 * `RABBITMQ_MANAGEMENT_URL`, `SQS_ENDPOINT`, `AWS_REGION`, `NATS_URL`).
 */
export interface ConformanceServices {
  /** PostgreSQL; its user may create databases (one per scenario, dropped after). */
  databaseUrl: string;
  /** RabbitMQ: its AMQP URL and its management API (one virtual host per scenario). */
  amqpUrl?: string | undefined;
  /** The management API URL, with its credentials. */
  managementUrl?: string | undefined;
  /** An SQS-compatible endpoint; unset: AWS (queues named with a prefix per scenario). */
  sqsEndpoint?: string | undefined;
  /** The SQS region (default `us-east-1`). */
  region?: string | undefined;
  /** NATS server URL(s), comma-separated (streams named with a prefix per scenario). */
  natsUrl?: string | undefined;
}

/** What `runConformance` runs, on which transport and services. */
export interface ConformanceOptions {
  /** The subject, or the path of its module (needed for `killed-process`: a child imports it). */
  subject: ConformanceSubject | string;
  /** A registered transport: `memory`, `rabbitmq`, `sqs`, `nats-jetstream`. */
  transport: string;
  /** Where the services are (`conformanceServicesFromEnv()` reads them as the CLI does). */
  services: ConformanceServices;
  /** Default: every scenario. */
  scenarios?: readonly ScenarioName[] | undefined;
  /** Good events per scenario (default 8). */
  events?: number | undefined;
  /** A directory to write `conformance.json` and `conformance.md` to. */
  out?: string | undefined;
  /** How long a scenario may wait for its messages to settle (default 60 s). */
  timeoutMs?: number | undefined;
  /** Scenarios run at once, each on its own database and namespace (default 3). */
  concurrency?: number | undefined;
  /** Given to the handler and the backend (default: none). */
  logger?: Logger | undefined;
  /** Called as each scenario ends. */
  onResult?: ((result: ScenarioResult) => void) | undefined;
}

/** What became of a scenario's good events (after Jepsen's accounting). */
export interface ScenarioAccounting {
  /** Good events of the run. */
  events: number;
  /** Confirmed by the publisher. */
  accepted: number;
  /** With exactly one effect in the database. */
  appliedOnce: number;
  /** Accepted, with no effect and not parked. */
  lost: number;
  /** With more than one effect. */
  duplicated: number;
  /** In the parking lot at the end. */
  parked: number;
  /** Effects of messages that were not good events (a poison message applied). */
  unexpected: number;
}

/** One thing that happened to a message, in the order it happened. */
export interface TimelineEntry {
  /** Milliseconds since the scenario started. */
  atMs: number;
  /**
   * `published`, `delivered`, `outcome` (what the handler returned), `fault` (injected),
   * `given-back`, the driver's journal steps (`retry-scheduled`, `parked`, `acked`, …), `mark`.
   */
  step: string;
  /** What happened, in words (an outcome, a fault, which process). */
  detail?: string | undefined;
}

/** What happened to one message of a failing scenario, in order. */
export interface MessageTimeline {
  /** Its id, in lower case. */
  messageId: string;
  /** `event 3`, `poison (unreadable body)`, … */
  label: string;
  /** The last says how many effects the database held at the end. */
  entries: TimelineEntry[];
}

/** One scenario's result on one transport. */
export interface ScenarioResult {
  /** Which scenario. */
  scenario: ScenarioName;
  /** The transport it ran on. */
  transport: string;
  /** `pass`: the expectation held; `fail`: it did not (see `differences`); `n/a`: see `reason`. */
  status: 'pass' | 'fail' | 'n/a';
  /** What must hold, in one line. */
  expectation: string;
  /** Why it does not apply (`n/a`). */
  reason?: string | undefined;
  /** What became of its good events (absent when it did not run, or failed before the end). */
  accounting?: ScenarioAccounting | undefined;
  /** What the scenario measured besides (copies, faults fired, give-backs, …). */
  facts: Record<string, number | string | boolean>;
  /** Where the expectation did not hold (empty: it held). */
  differences: string[];
  /** Setup, run and teardown. */
  durationMs: number;
  /** Per message, for a failing scenario: the messages that explain the failure. */
  timelines: MessageTimeline[];
}

/** A run of the kit: every scenario's result on one transport (`conformance.json`). */
export interface ConformanceReport {
  /** The transport it ran on. */
  transport: string;
  /** The subject's consumer name, and its module path when given as one. */
  subject: { consumer: string; module?: string | undefined };
  /** When it started (ISO). */
  startedAt: string;
  /** The whole run. */
  durationMs: number;
  /** Good events per scenario. */
  events: number;
  /** Every applicable scenario passed. */
  passed: boolean;
  /** In the order of `SCENARIO_NAMES`. */
  results: ScenarioResult[];
}
