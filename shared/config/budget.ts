import {
  budgetOf,
  DEFAULT_RETENTION,
  DEFAULT_RETRY_BUDGET,
  parseEnv,
  type Retention,
  type RetryBudget,
} from './env.js';
import { functionEnvironment } from './functionEnvironment.js';

/**
 * The retry budget and retention, configured once (the `RETRY_*` and `*_RETENTION_MS` variables
 * of the configuration schema in `env.ts`) and read by every transport, the local runtime and the
 * CDK stacks.
 */
export {
  DEFAULT_REDRIVE_WINDOW_MS,
  DEFAULT_RETENTION,
  DEFAULT_RETRY_BUDGET,
  type Retention,
  type RetryBudget,
} from './env.js';

/** The scaled-down ladder used by tests and the lab: 1 s, 2 s, 3 s, no jitter. */
export const TEST_RETRY_BUDGET: RetryBudget = {
  ladderMs: [1_000, 2_000, 3_000],
  maxAttempts: 3,
  maxAgeMs: 60_000,
  jitter: 0,
};

/**
 * Checks a budget given in code, with the retention it runs under, against the configuration
 * schema: the same limits and rules as when read from the environment (so the `ConfigError`
 * names the variables: `RETRY_LADDER_MS.1: the ladder must not decrease`, `INBOX_RETENTION_MS: …
 * must exceed RETRY_MAX_AGE_MS + REDRIVE_LIMIT × (PARKING_RETENTION_MS + …`).
 */
export function validateBudget(
  budget: RetryBudget,
  retention: Retention = DEFAULT_RETENTION,
): RetryBudget {
  return budgetOf(parseEnv(functionEnvironment({ budget, retention })));
}

/**
 * Reads the budget from the environment (`RETRY_LADDER_MS=1000,2000,3000` etc.; unset variables
 * from `base`), validated by the configuration schema together with the retention it runs under:
 * `retention` when given, otherwise the one `source` configures.
 */
export function loadBudget(
  source: NodeJS.ProcessEnv = process.env,
  base: RetryBudget = DEFAULT_RETRY_BUDGET,
  retention?: Retention,
): RetryBudget {
  const set = Object.fromEntries(
    Object.entries(source).filter(([, v]) => v !== undefined && v !== ''),
  );
  return budgetOf(
    parseEnv({
      ...functionEnvironment({ budget: base }),
      ...set,
      ...(retention ? functionEnvironment({ retention }) : {}),
    }),
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
