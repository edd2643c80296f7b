import { z } from 'zod';
import { ConfigError } from './env.js';

/**
 * The retry budget and retention (DESIGN §6), configured once and read by every transport, the
 * local runtime and (later) the CDK stacks. Validated at load: a budget that cannot work fails
 * at start, naming the setting.
 */
export const retryBudgetSchema = z
  .object({
    /** Delay before each retry: attempt n waits ladderMs[min(n-1, last)]. */
    ladderMs: z
      .array(
        z
          .number()
          .int()
          .min(100)
          .max(12 * 3600 * 1000),
      )
      .min(1)
      .max(20),
    /** Retries after the first delivery; then the message is parked ("exhausted"). */
    maxAttempts: z.number().int().min(0).max(100),
    /** Age from the event's `occurred_at` after which it is parked instead of retried. */
    maxAgeMs: z.number().int().min(1_000),
    /**
     * ± fraction applied to each delay. On RabbitMQ (one queue per delay) it becomes two
     * neighbouring buckets per step (delay·(1−j) and delay·(1+j)), chosen at random.
     */
    jitter: z.number().min(0).max(0.5),
  })
  .superRefine((b, ctx) => {
    for (let i = 1; i < b.ladderMs.length; i++) {
      if ((b.ladderMs[i] as number) < (b.ladderMs[i - 1] as number)) {
        ctx.addIssue({
          code: 'custom',
          path: ['ladderMs', i],
          message: 'the ladder must not decrease',
        });
      }
    }
  });

export type RetryBudget = z.infer<typeof retryBudgetSchema>;

/** Production defaults: 5 s, 30 s, 5 min; three retries; 15 minutes; ±10 %. */
export const DEFAULT_RETRY_BUDGET: RetryBudget = {
  ladderMs: [5_000, 30_000, 300_000],
  maxAttempts: 3,
  maxAgeMs: 15 * 60_000,
  jitter: 0.1,
};

/** The scaled-down ladder used by tests and the lab: 1 s, 2 s, 3 s, no jitter. */
export const TEST_RETRY_BUDGET: RetryBudget = {
  ladderMs: [1_000, 2_000, 3_000],
  maxAttempts: 3,
  maxAgeMs: 60_000,
  jitter: 0,
};

export const retentionSchema = z.object({
  /** How long parked messages are kept (RabbitMQ parking queue TTL; SQS parking retention). */
  parkingMs: z
    .number()
    .int()
    .min(60_000)
    .max(14 * 24 * 3600 * 1000),
  /** How long inbox rows (processed_messages) are kept. */
  inboxMs: z.number().int().min(60_000),
  /** How long published outbox rows are kept. */
  publishedOutboxMs: z.number().int().min(60_000),
});
export type Retention = z.infer<typeof retentionSchema>;

export const DEFAULT_RETENTION: Retention = {
  parkingMs: 14 * 24 * 3600 * 1000,
  inboxMs: 21 * 24 * 3600 * 1000,
  publishedOutboxMs: 7 * 24 * 3600 * 1000,
};

export function validateBudget(
  budget: RetryBudget,
  retention: Retention = DEFAULT_RETENTION,
): RetryBudget {
  const parsed = retryBudgetSchema.safeParse(budget);
  if (!parsed.success) {
    const i = parsed.error.issues[0];
    throw new ConfigError(`retry budget: ${i?.path.join('.')}: ${i?.message}`, {
      cause: parsed.error,
    });
  }
  const r = retentionSchema.safeParse(retention);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new ConfigError(`retention: ${i?.path.join('.')}: ${i?.message}`, { cause: r.error });
  }
  // A redelivered message (from parking, via redrive) must still find its inbox row, or it would
  // be applied twice: keep inbox rows longer than anything can come back.
  const redeliveryWindow = retention.parkingMs + budget.maxAgeMs;
  if (retention.inboxMs <= redeliveryWindow) {
    throw new ConfigError(
      `retention: inboxMs (${retention.inboxMs}) must exceed parkingMs + maxAgeMs (${redeliveryWindow}): ` +
        'a message redriven from parking would otherwise no longer be recognised as a duplicate',
    );
  }
  return parsed.data;
}

/** Reads a budget from the environment (RETRY_LADDER_MS=1000,2000,3000 etc.) over `base`. */
export function loadBudget(
  source: NodeJS.ProcessEnv = process.env,
  base: RetryBudget = DEFAULT_RETRY_BUDGET,
  retention: Retention = DEFAULT_RETENTION,
): RetryBudget {
  const num = (v: string | undefined) => (v === undefined || v === '' ? undefined : Number(v));
  return validateBudget(
    {
      ladderMs: source.RETRY_LADDER_MS
        ? source.RETRY_LADDER_MS.split(',').map((s) => Number(s.trim()))
        : base.ladderMs,
      maxAttempts: num(source.RETRY_MAX_ATTEMPTS) ?? base.maxAttempts,
      maxAgeMs: num(source.RETRY_MAX_AGE_MS) ?? base.maxAgeMs,
      jitter: num(source.RETRY_JITTER) ?? base.jitter,
    },
    retention,
  );
}

export type RetryDecision =
  | { retry: true; delayMs: number; attempt: number }
  | { retry: false; reason: 'exhausted' | 'max_age' };

/**
 * Decides the fate of a failed delivery. `attempt` is the number of retries already made
 * (`x-retry-attempt`, 0 on the first delivery). Deferrals (a predecessor is missing) ignore
 * `maxAttempts` and are bounded by age only.
 */
export function decideRetry(
  budget: RetryBudget,
  attempt: number,
  ageMs: number,
  options: { deferral?: boolean; random?: () => number } = {},
): RetryDecision {
  const next = attempt + 1;
  if (!options.deferral && next > budget.maxAttempts) return { retry: false, reason: 'exhausted' };
  const step = budget.ladderMs[Math.min(next, budget.ladderMs.length) - 1] as number;
  if (ageMs + step > budget.maxAgeMs) return { retry: false, reason: 'max_age' };
  return { retry: true, delayMs: step, attempt: next };
}

/** The delays a RabbitMQ retry queue exists for: each step, and its jitter neighbours. */
export function rabbitRetryDelays(budget: RetryBudget): number[] {
  const set = new Set<number>();
  for (const d of budget.ladderMs) {
    set.add(d);
    if (budget.jitter > 0) {
      set.add(Math.round(d * (1 - budget.jitter)));
      set.add(Math.round(d * (1 + budget.jitter)));
    }
  }
  return [...set].sort((a, b) => a - b);
}

/** Picks the RabbitMQ bucket for a ladder step: the step itself or, with jitter, a neighbour. */
export function rabbitRetryBucket(
  budget: RetryBudget,
  stepMs: number,
  random = Math.random,
): number {
  if (budget.jitter === 0) return stepMs;
  const r = random();
  if (r < 1 / 3) return Math.round(stepMs * (1 - budget.jitter));
  if (r < 2 / 3) return stepMs;
  return Math.round(stepMs * (1 + budget.jitter));
}
