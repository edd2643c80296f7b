import { z } from 'zod';
import { CONSUMER_PREFETCH } from './constants.js';
import { ConfigError } from './errors.js';
import { faultSpecSchema } from './faults.js';
import { inboxRetentionRule, transactionBoundsRule, visibilityTimeoutRule } from './rules.js';

export { ConfigError } from './errors.js';

/**
 * Runtime configuration: ONE schema for every setting a process reads from its environment,
 * validated once at load. A bad value, or settings that cannot work together (see the rules at
 * the end), fail at start with the variable(s) named (`invalid configuration: X: …`), never later
 * in the middle of work. `loadBudget()`, `loadRetention()`, `parseFaults()` and the migrations'
 * directory are views of this schema; `functionEnvironment()` writes it for the deployed
 * functions.
 */
const intFrom = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

/** The retry budget: how often and for how long a failed delivery is retried before it is parked. */
export interface RetryBudget {
  /** Delay before each retry: attempt n waits ladderMs[min(n-1, last)]. */
  ladderMs: number[];
  /** Retries after the first delivery; then the message is parked ("exhausted"). */
  maxAttempts: number;
  /** Age from the event's `occurred_at` after which it is parked instead of retried. */
  maxAgeMs: number;
  /**
   * ± fraction applied to each delay. On RabbitMQ (one queue per delay) it becomes two
   * neighbouring buckets per step (delay·(1−j) and delay·(1+j)), chosen at random.
   */
  jitter: number;
}

/** How long what grows with every message is kept (ms). */
export interface Retention {
  /** Parked messages (RabbitMQ parking queue TTL; SQS parking retention). */
  parkingMs: number;
  /** Inbox rows (processed_messages): must outlive parking + max age + the redrive window. */
  inboxMs: number;
  /** Published outbox rows. */
  publishedOutboxMs: number;
  /**
   * The redrive window: how long a message redriven at the very end of its parking retention
   * may still take to be settled. Unset = {@link DEFAULT_REDRIVE_WINDOW_MS}.
   */
  redriveWindowMs?: number;
  /**
   * How many redrives from the parking lot per message the inbox retention is sized for: each is
   * another stay in parking, redrive and retry window the inbox must outlive. Unset =
   * {@link DEFAULT_REDRIVE_LIMIT}.
   */
  redriveLimit?: number;
}

/** Production defaults: 5 s, 30 s, 5 min; three retries; 15 minutes; ±10 %. */
export const DEFAULT_RETRY_BUDGET: RetryBudget = {
  ladderMs: [5_000, 30_000, 300_000],
  maxAttempts: 3,
  maxAgeMs: 15 * 60_000,
  jitter: 0.1,
};

/**
 * The redrive window (one day). After a redrive a message waits in the source queue behind
 * whatever else is there, then gets one delivery: the redrive resets its attempt count but not
 * its age, which is past the budget's max age, so a failure parks it again instead of retrying
 * it. What takes time is therefore the redrive run itself (paced by `--rate`, or SQS's own move
 * task) and the wait in the source queue: a day covers a large parking lot redriven at a modest
 * rate into a backlog. It is a setting (`REDRIVE_WINDOW_MS`), not derived from the budget,
 * because neither of those is bounded by the budget.
 */
export const DEFAULT_REDRIVE_WINDOW_MS = 24 * 3600 * 1000;

/**
 * One redrive per message by default: the default inbox retention (21 days) covers one cycle
 * (15 min + 1 × (14 d + 1 d + 15 min)), not two (30 d 45 min). Raise `REDRIVE_LIMIT` together
 * with `INBOX_RETENTION_MS`.
 */
export const DEFAULT_REDRIVE_LIMIT = 1;

/**
 * Parking 14 days, inbox 21 days (> 15 min + 1 × (14 d + 1 d + 15 min)), published outbox rows
 * 7 days, one redrive per message within a day.
 */
export const DEFAULT_RETENTION: Retention = {
  parkingMs: 14 * 24 * 3600 * 1000,
  inboxMs: 21 * 24 * 3600 * 1000,
  publishedOutboxMs: 7 * 24 * 3600 * 1000,
  redriveWindowMs: DEFAULT_REDRIVE_WINDOW_MS,
  redriveLimit: DEFAULT_REDRIVE_LIMIT,
};

/**
 * How long one transaction may wait or sit still (ms; 0 = no bound), set with `SET LOCAL` at its
 * start so they end with it. A Lambda function that times out mid-transaction rolls nothing back
 * itself: through the Data API the transaction and its row locks would stay until the service's
 * 3-minute inactivity expiry; with node-postgres until the server notices the dead connection.
 * These bounds end it from the database side.
 */
export interface TransactionTimeouts {
  /** `lock_timeout`: the longest wait for one lock (a row another transaction holds). */
  lockTimeoutMs: number;
  /** `statement_timeout`: the longest statement, lock waits included. */
  statementTimeoutMs: number;
  /**
   * `idle_in_transaction_session_timeout`: the longest pause between two statements of the
   * transaction; past it the server ends the session, and the transaction with it. The relay sits
   * still while it waits for broker confirms (PUBLISH_TIMEOUT_MS), so it must be longer.
   */
  idleInTransactionTimeoutMs: number;
}

/**
 * The transaction bounds at the defaults (FUNCTION_TIMEOUT_MS 5 s, PUBLISH_TIMEOUT_MS 10 s): lock
 * waits 2 s, statements 4 s, pauses inside a transaction 15 s.
 */
export const DEFAULT_TRANSACTION_TIMEOUTS: TransactionTimeouts = {
  lockTimeoutMs: 2_000,
  statementTimeoutMs: 4_000,
  idleInTransactionTimeoutMs: 15_000,
};

/**
 * The bounds from the settings: each variable when set; unset, a statement gets 80 % of the
 * function timeout, a lock wait half of that (at most 2 s), a pause the publish timeout + 5 s.
 */
function transactionTimeoutsFrom(e: {
  DB_LOCK_TIMEOUT_MS?: number | undefined;
  DB_STATEMENT_TIMEOUT_MS?: number | undefined;
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS?: number | undefined;
  FUNCTION_TIMEOUT_MS: number;
  PUBLISH_TIMEOUT_MS: number;
}): TransactionTimeouts {
  const statementTimeoutMs = e.DB_STATEMENT_TIMEOUT_MS ?? Math.floor(e.FUNCTION_TIMEOUT_MS * 0.8);
  return {
    lockTimeoutMs:
      e.DB_LOCK_TIMEOUT_MS ?? Math.max(1, Math.min(2_000, Math.floor(statementTimeoutMs / 2))),
    statementTimeoutMs,
    idleInTransactionTimeoutMs: e.DB_IDLE_IN_TRANSACTION_TIMEOUT_MS ?? e.PUBLISH_TIMEOUT_MS + 5_000,
  };
}

/** `name=value` pairs, comma separated (`inventory_outbox=arn:…,shipping_outbox=arn:…`), as a record. */
const namePairs = (what: string) =>
  z
    .string()
    .transform((s) => s.split(',').filter((pair) => pair.trim() !== ''))
    .pipe(
      z.array(
        z.string().regex(/^[a-z_][a-z0-9_]*=[^,=\s]+$/, `${what}=arn pairs, comma separated`),
      ),
    )
    .transform((pairs) =>
      Object.fromEntries(pairs.map((pair) => pair.split('=', 2) as [string, string])),
    );

/** `RETRY_LADDER_MS=5000,30000,300000`: at least one step, never decreasing. */
const ladderSchema = z
  .string()
  .transform((s) => s.split(',').map((step) => Number(step.trim())))
  .pipe(
    z
      .array(
        z
          .number()
          .int()
          .min(100)
          .max(12 * 3600 * 1000),
      )
      .min(1)
      .max(20)
      .superRefine((ladder, ctx) => {
        for (let i = 1; i < ladder.length; i++) {
          if ((ladder[i] as number) < (ladder[i - 1] as number)) {
            ctx.addIssue({ code: 'custom', path: [i], message: 'the ladder must not decrease' });
          }
        }
      }),
  );

const msAtLeast = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce.number().int().min(min).max(max);

const envObject = z.object({
  /** The order service's database (node-postgres); a single-service function's own. */
  DATABASE_URL: z.string().url().default('postgres://postgres@127.0.0.1:5432/test'),
  /**
   * The inventory service's database (node-postgres). Unset: `<DATABASE_URL's database>_inventory`
   * on the same server (`inventoryDatabaseUrl`).
   */
  INVENTORY_DATABASE_URL: z.string().url().optional(),
  AMQP_URL: z.string().url().default('amqp://guest:guest@127.0.0.1:5672'),
  RABBITMQ_MANAGEMENT_URL: z.string().url().default('http://guest:guest@127.0.0.1:15672'),
  PORT: intFrom(0, 65_535).default(3000),
  /** An SQS-compatible endpoint; unset = the embedded server (fauxqs) on SQS_LOCAL_PORT. */
  SQS_ENDPOINT: z.string().url().optional(),
  /** Where local roles find (or start) the embedded SQS server, so separate roles share one. */
  SQS_LOCAL_PORT: intFrom(1, 65_535).default(9324),
  /** Prefix for SQS queue names (tests and labs sharing one server). */
  SQS_QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]{0,40}$/)
    .default(''),
  AWS_REGION: z.string().default('us-east-1'),
  /** Fault points armed at start: `point:action,…` (see `shared/config/faults.ts`). */
  FAULTS: faultSpecSchema.default(() => new Map()),
  /** Rows per relay round. */
  RELAY_BATCH_SIZE: intFrom(1, 5_000).default(500),
  /** Failed publishes before a row needs attention and leaves the batches. */
  RELAY_MAX_ATTEMPTS: intFrom(1, 1_000).default(10),
  /**
   * Relay loops per outbox in one process. Two overlap one batch's publish with the other's
   * database work (measured: 1 → 0.52, 2 → 0.70, 4 → 0.78 of the raw publish rate).
   */
  RELAY_CONCURRENCY: intFrom(1, 16).default(2),
  /** Connections in the process's PostgreSQL pool. */
  DB_POOL_MAX: intFrom(1, 100).default(10),
  /**
   * Bounds of every transaction of a deployed function (`SET LOCAL`, both drivers; see
   * `shared/db/transactionBounds.ts` and the rules below): the longest lock wait, the longest
   * statement, the longest pause inside a transaction. Unset, they follow the other settings
   * ({@link transactionTimeoutsOf}). In Lambda each is also capped by the invocation's deadline
   * (`transactionDeadline`).
   */
  DB_LOCK_TIMEOUT_MS: intFrom(1, 900_000).optional(),
  DB_STATEMENT_TIMEOUT_MS: intFrom(1, 900_000).optional(),
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: intFrom(1, 900_000).optional(),
  /** Idle wait between empty relay rounds (ms). */
  RELAY_IDLE_WAIT_MS: intFrom(1, 60_000).default(100),
  /** The longest one relay invocation keeps draining (ms); the rest of its timeout is margin. */
  RELAY_DRAIN_BUDGET_MS: intFrom(0, 900_000).default(50_000),
  /**
   * A draining relay invocation stops once no row was claimed for this long (ms). Kicks from one
   * producer container are at least RELAY_KICK_INTERVAL_MS apart, so a linger longer than that
   * (plus an invocation's start-up) means a skipped kick's row is found by the relay its previous
   * kick started (docs/outbox-relay.md, "Running it").
   */
  RELAY_LINGER_MS: intFrom(0, 900_000).default(3_000),
  /** The relay function's name (producers: place-order, reserve-inventory): the kick after COMMIT. */
  RELAY_FUNCTION_NAME: z.string().min(1).optional(),
  /** Smallest gap between two kicks from one producer container (ms). */
  RELAY_KICK_INTERVAL_MS: intFrom(0, 60_000).default(1_000),
  /** The SSM parameter holding the relay's state (when it last ran on the database, and whether rows were left). */
  RELAY_STATE_PARAMETER: z.string().min(1).optional(),
  /** The scheduled tick sweeps the outboxes only after this long without a kicked run (ms)… */
  RELAY_SWEEP_QUIET_MS: intFrom(0, 86_400_000).default(600_000),
  /** …and this long after the previous run on the database (ms); at once while rows are left. */
  RELAY_SWEEP_INTERVAL_MS: intFrom(0, 86_400_000).default(3_600_000),
  /** Worker mode: unacknowledged deliveries per channel, and the largest batch (why 100: CONSUMER_PREFETCH). */
  CONSUMER_PREFETCH: intFrom(1, 1_000).default(CONSUMER_PREFETCH),
  /** Worker mode: consumers (channels, each with its own transaction) in one process. */
  CONSUMER_CONCURRENCY: intFrom(1, 64).default(1),
  /**
   * `dev`'s Amazon MQ trigger emulation: messages per invocation and batching window. Unset, the
   * synthesized template's event source mapping says (one source: infra/config.ts).
   */
  MQ_BATCH_SIZE: intFrom(1, 10_000).optional(),
  MQ_BATCH_WINDOW_MS: intFrom(0, 300_000).optional(),
  /** SQS consumer: how "retry later" is done (visibility timeout change, or a delayed copy). */
  SQS_RETRY_MODE: z.enum(['visibility', 'resend']).default('visibility'),
  /**
   * `dev`'s SQS trigger emulation: records per invocation, batching window, invocations at once.
   * Unset, the synthesized template's event source mapping says.
   */
  SQS_BATCH_SIZE: intFrom(1, 10_000).optional(),
  SQS_BATCH_WINDOW_MS: intFrom(0, 300_000).optional(),
  SQS_MAX_CONCURRENCY: intFrom(1, 1_000).optional(),
  /**
   * The visibility timeout (s) of the SQS queue this function consumes; must be ≥ 6 ×
   * FUNCTION_TIMEOUT_MS. Set for the deployed SQS consumers (the queue's real attribute) and
   * checked then; unset elsewhere (a function that consumes no SQS queue), when local queues
   * are created with the SQS backend's default (30 s).
   */
  SQS_VISIBILITY_TIMEOUT_S: intFrom(0, 43_200).optional(),
  /**
   * The function's timeout (ms): for the trigger emulation, and the ceiling of the transaction
   * bounds. The stacks set it to each function's configured timeout; 5 s locally.
   */
  FUNCTION_TIMEOUT_MS: intFrom(1_000, 900_000).default(5_000),
  /** Which transport a deployed function uses (the relay, for one). */
  TRANSPORT: z.enum(['rabbitmq', 'sqs']).default('rabbitmq'),
  /** SQL adapter of deployed functions: node-postgres (DATABASE_URL) or the RDS Data API. */
  DB_DRIVER: z.enum(['pg', 'data-api']).default('pg'),
  DATA_API_RESOURCE_ARN: z.string().optional(),
  DATA_API_SECRET_ARN: z.string().optional(),
  /** The order service's database through the Data API (a single-service function's own). */
  DATA_API_DATABASE: z.string().optional(),
  /** The inventory service's database through the Data API, in the same cluster. */
  INVENTORY_DATA_API_DATABASE: z.string().optional(),
  /** Data API endpoint override (the local endpoint); unset = AWS. */
  DATA_API_ENDPOINT: z.string().url().optional(),
  /** Queue URLs of a deployed SQS pipeline. */
  SOURCE_QUEUE_URL: z.string().optional(),
  PARKING_QUEUE_URL: z.string().optional(),
  RESULTS_QUEUE_URL: z.string().optional(),
  /**
   * The SNS topics of a deployed SQS pipeline's fan-out streams: `stream=arn` pairs, comma
   * separated (`inventory_outbox=arn:aws:sns:…:inventory`).
   */
  STREAM_TOPIC_ARNS: namePairs('stream').optional(),
  /**
   * The migrate function of a service of yours: the secret of each database login to create or
   * update after the migrations, by the group role it joins (`shipping_rw=arn:aws:secretsmanager:…`).
   */
  DB_LOGIN_SECRETS: namePairs('group').optional(),
  /**
   * A deployed RabbitMQ pipeline (Amazon MQ): the Secrets Manager secret with the broker's
   * `{"username","password"}`, read at cold start, and the endpoints the broker reports
   * (`amqps://…:5671`, `https://…` for the management API). Set, they replace AMQP_URL and
   * RABBITMQ_MANAGEMENT_URL.
   */
  BROKER_SECRET_ARN: z.string().optional(),
  BROKER_AMQP_ENDPOINT: z.string().url().optional(),
  BROKER_MANAGEMENT_ENDPOINT: z.string().url().optional(),
  BROKER_VHOST: z.string().default('/'),
  /**
   * The broker-setup function only (it runs as the broker's administrator): the secret of the
   * `pipeline` user it creates, with permissions limited to the pipeline's names in BROKER_VHOST.
   */
  BROKER_PIPELINE_SECRET_ARN: z.string().optional(),
  /** Confirms awaited at once per channel. */
  PUBLISH_WINDOW: intFrom(1, 10_000).default(1_000),
  /** How long a publish waits for a broker confirm before the message counts as failed (ms). */
  PUBLISH_TIMEOUT_MS: intFrom(100, 120_000).default(10_000),
  /** The retry budget ({@link RetryBudget}). */
  RETRY_LADDER_MS: ladderSchema.default(() => [...DEFAULT_RETRY_BUDGET.ladderMs]),
  RETRY_MAX_ATTEMPTS: intFrom(0, 100).default(DEFAULT_RETRY_BUDGET.maxAttempts),
  RETRY_MAX_AGE_MS: msAtLeast(1_000).default(DEFAULT_RETRY_BUDGET.maxAgeMs),
  RETRY_JITTER: z.coerce.number().min(0).max(0.5).default(DEFAULT_RETRY_BUDGET.jitter),
  /** Retention ({@link Retention}); SQS keeps a message at most 14 days. */
  PARKING_RETENTION_MS: msAtLeast(60_000, 14 * 24 * 3600 * 1000).default(
    DEFAULT_RETENTION.parkingMs,
  ),
  INBOX_RETENTION_MS: msAtLeast(60_000).default(DEFAULT_RETENTION.inboxMs),
  PUBLISHED_OUTBOX_RETENTION_MS: msAtLeast(60_000).default(DEFAULT_RETENTION.publishedOutboxMs),
  /** See {@link DEFAULT_REDRIVE_WINDOW_MS}. */
  REDRIVE_WINDOW_MS: msAtLeast(0).default(DEFAULT_REDRIVE_WINDOW_MS),
  /** See {@link DEFAULT_REDRIVE_LIMIT}. */
  REDRIVE_LIMIT: intFrom(0, 100).default(DEFAULT_REDRIVE_LIMIT),
  /** SQL migrations (`NNNN_name.sql`); a Lambda bundle ships them at `/var/task/migrations`. */
  MIGRATIONS_DIR: z.string().min(1).optional(),
});

/** Every variable the schema reads. */
export type EnvName = keyof typeof envObject.shape;
export const ENV_NAMES = Object.keys(envObject.shape) as EnvName[];

/** Where each field of the retry budget is read from. */
export const BUDGET_ENV = {
  ladderMs: 'RETRY_LADDER_MS',
  maxAttempts: 'RETRY_MAX_ATTEMPTS',
  maxAgeMs: 'RETRY_MAX_AGE_MS',
  jitter: 'RETRY_JITTER',
} as const satisfies Record<keyof RetryBudget, EnvName>;

/** Where each field of the retention is read from. */
export const RETENTION_ENV = {
  inboxMs: 'INBOX_RETENTION_MS',
  parkingMs: 'PARKING_RETENTION_MS',
  publishedOutboxMs: 'PUBLISHED_OUTBOX_RETENTION_MS',
  redriveWindowMs: 'REDRIVE_WINDOW_MS',
  redriveLimit: 'REDRIVE_LIMIT',
} as const satisfies Record<keyof Retention, EnvName>;

/** Where the transaction bounds rule reads each term from. */
const TRANSACTION_TIMEOUTS_ENV = {
  lockTimeoutMs: 'DB_LOCK_TIMEOUT_MS',
  statementTimeoutMs: 'DB_STATEMENT_TIMEOUT_MS',
  idleInTransactionTimeoutMs: 'DB_IDLE_IN_TRANSACTION_TIMEOUT_MS',
  functionTimeoutMs: 'FUNCTION_TIMEOUT_MS',
  publishTimeoutMs: 'PUBLISH_TIMEOUT_MS',
} as const satisfies Record<string, EnvName>;

/**
 * The rules between settings ({@link visibilityTimeoutRule}, {@link inboxRetentionRule}), checked
 * once every variable is valid on its own; each issue is filed under the variable to change.
 */
const envSchema = envObject.superRefine((env, ctx) => {
  const visibility =
    env.SQS_VISIBILITY_TIMEOUT_S === undefined
      ? undefined
      : visibilityTimeoutRule(
          env.SQS_VISIBILITY_TIMEOUT_S,
          env.FUNCTION_TIMEOUT_MS,
          'FUNCTION_TIMEOUT_MS',
        );
  if (visibility) {
    ctx.addIssue({
      code: 'custom',
      path: ['SQS_VISIBILITY_TIMEOUT_S'],
      message: `${env.SQS_VISIBILITY_TIMEOUT_S} s ${visibility}`,
    });
  }
  const inbox = inboxRetentionRule(
    {
      inboxMs: env.INBOX_RETENTION_MS,
      parkingMs: env.PARKING_RETENTION_MS,
      maxAgeMs: env.RETRY_MAX_AGE_MS,
      redriveWindowMs: env.REDRIVE_WINDOW_MS,
      redriveLimit: env.REDRIVE_LIMIT,
    },
    {
      parkingMs: RETENTION_ENV.parkingMs,
      maxAgeMs: BUDGET_ENV.maxAgeMs,
      redriveWindowMs: RETENTION_ENV.redriveWindowMs,
      redriveLimit: RETENTION_ENV.redriveLimit,
    },
  );
  if (inbox) {
    ctx.addIssue({
      code: 'custom',
      path: [RETENTION_ENV.inboxMs],
      message: `${env.INBOX_RETENTION_MS} ${inbox}`,
    });
  }
  const bounds = transactionBoundsRule(
    {
      ...transactionTimeoutsFrom(env),
      functionTimeoutMs: env.FUNCTION_TIMEOUT_MS,
      publishTimeoutMs: env.PUBLISH_TIMEOUT_MS,
    },
    TRANSACTION_TIMEOUTS_ENV,
  );
  if (bounds) {
    ctx.addIssue({
      code: 'custom',
      path: [TRANSACTION_TIMEOUTS_ENV[bounds.field]],
      message: bounds.message,
    });
  }
});

/** The transaction bounds of a loaded configuration. */
export function transactionTimeoutsOf(env: Env): TransactionTimeouts {
  return transactionTimeoutsFrom(env);
}

export type Env = z.infer<typeof envSchema>;

/**
 * Reads and validates the configuration from `source` (default `process.env`); unset and empty
 * variables take their defaults. Throws a `ConfigError` listing every bad variable.
 */
export function loadEnv(source: NodeJS.ProcessEnv = process.env): Env {
  return parseEnv(
    Object.fromEntries(Object.entries(source).filter(([, v]) => v !== undefined && v !== '')),
  );
}

/**
 * Validates exactly these variables, where an empty value is a value (`RETRY_LADDER_MS=''` is an
 * empty ladder, refused): for settings written from typed values (`functionEnvironment`).
 */
export function parseEnv(vars: Readonly<Record<string, string | undefined>>): Env {
  const parsed = envSchema.safeParse(vars);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration: ${lines.join('; ')}`, { cause: parsed.error });
  }
  return parsed.data;
}

/** The retry budget of a loaded configuration. */
export function budgetOf(env: Env): RetryBudget {
  return {
    ladderMs: [...env[BUDGET_ENV.ladderMs]],
    maxAttempts: env[BUDGET_ENV.maxAttempts],
    maxAgeMs: env[BUDGET_ENV.maxAgeMs],
    jitter: env[BUDGET_ENV.jitter],
  };
}

/** The retention of a loaded configuration. */
export function retentionOf(env: Env): Retention {
  return {
    parkingMs: env[RETENTION_ENV.parkingMs],
    inboxMs: env[RETENTION_ENV.inboxMs],
    publishedOutboxMs: env[RETENTION_ENV.publishedOutboxMs],
    redriveWindowMs: env[RETENTION_ENV.redriveWindowMs],
    redriveLimit: env[RETENTION_ENV.redriveLimit],
  };
}
