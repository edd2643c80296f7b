import { z } from 'zod';
import { AMAZON_MQ_TRIGGER } from './constants.js';

/**
 * Runtime configuration, read from the environment once and validated (DESIGN §10).
 * A bad value fails at start with the variable named, never later in the middle of work.
 */
const intFrom = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

const envSchema = z.object({
  DATABASE_URL: z.string().url().default('postgres://postgres@127.0.0.1:5432/test'),
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
  FAULTS: z.string().default(''),
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
  /** Idle wait between empty relay rounds (ms). */
  RELAY_IDLE_WAIT_MS: intFrom(1, 60_000).default(100),
  /** How long one scheduled relay invocation keeps draining (ms); the rest of the minute is margin. */
  RELAY_DRAIN_BUDGET_MS: intFrom(0, 900_000).default(50_000),
  /**
   * Worker mode: unacknowledged deliveries per consumer (never 0, which would mean unlimited), and
   * so the largest batch in one transaction. 100, like the Amazon MQ trigger's batch: at 500
   * orders/s on a loaded 2-core machine, 16 capped one worker near the offered rate (one commit per
   * ≤ 16 messages) and the queue grew (end-to-end p99 700–830 ms; 140–180 ms with 100).
   */
  CONSUMER_PREFETCH: intFrom(1, 1_000).default(100),
  /** Worker mode: consumers (channels, each with its own transaction) in one process. */
  CONSUMER_CONCURRENCY: intFrom(1, 64).default(1),
  /** Amazon MQ trigger: messages per invocation and batching window (AWS defaults 100 / 500 ms). */
  MQ_BATCH_SIZE: intFrom(1, 10_000).default(AMAZON_MQ_TRIGGER.batchSize),
  MQ_BATCH_WINDOW_MS: intFrom(0, 300_000).default(AMAZON_MQ_TRIGGER.batchWindowMs),
  /** SQS consumer: how "retry later" is done (visibility timeout change, or a delayed copy). */
  SQS_RETRY_MODE: z.enum(['visibility', 'resend']).default('visibility'),
  /** SQS trigger: records per invocation, batching window, invocations at once. */
  SQS_BATCH_SIZE: intFrom(1, 10_000).default(10),
  SQS_BATCH_WINDOW_MS: intFrom(0, 300_000).default(0),
  SQS_MAX_CONCURRENCY: intFrom(1, 1_000).default(2),
  /** The source queue's visibility timeout (s); must be ≥ 6 × FUNCTION_TIMEOUT_MS. */
  SQS_VISIBILITY_TIMEOUT_S: intFrom(0, 43_200).default(30),
  /** The consumer function's timeout (ms), for the trigger emulation. */
  FUNCTION_TIMEOUT_MS: intFrom(1_000, 900_000).default(5_000),
  /** Which transport a deployed function uses (the relay, for one). */
  TRANSPORT: z.enum(['rabbitmq', 'sqs']).default('rabbitmq'),
  /** SQL adapter of deployed functions: node-postgres (DATABASE_URL) or the RDS Data API. */
  DB_DRIVER: z.enum(['pg', 'data-api']).default('pg'),
  DATA_API_RESOURCE_ARN: z.string().optional(),
  DATA_API_SECRET_ARN: z.string().optional(),
  DATA_API_DATABASE: z.string().optional(),
  /** Data API endpoint override (the local endpoint); unset = AWS. */
  DATA_API_ENDPOINT: z.string().url().optional(),
  /** Queue URLs of a deployed SQS pipeline. */
  SOURCE_QUEUE_URL: z.string().optional(),
  PARKING_QUEUE_URL: z.string().optional(),
  RESULTS_QUEUE_URL: z.string().optional(),
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
  /** Confirms awaited at once per channel. */
  PUBLISH_WINDOW: intFrom(1, 10_000).default(1_000),
  /** How long a publish waits for a broker confirm before the message counts as failed (ms). */
  PUBLISH_TIMEOUT_MS: intFrom(100, 120_000).default(10_000),
});

export type Env = z.infer<typeof envSchema>;

export class ConfigError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ConfigError';
  }
}

export function loadEnv(source: NodeJS.ProcessEnv = process.env): Env {
  const parsed = envSchema.safeParse(
    Object.fromEntries(Object.entries(source).filter(([, v]) => v !== undefined && v !== '')),
  );
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration: ${lines.join('; ')}`, { cause: parsed.error });
  }
  return parsed.data;
}
