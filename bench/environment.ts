import { createScratch, type ScratchEnvironment } from '../devkit/scratch.js';
import { DEFAULT_RETENTION, TEST_RETRY_BUDGET } from '../shared/config/budget.js';
import type { Env } from '../shared/config/env.js';
import type { Journal } from '../shared/consumer/journal.js';
import type { BackendBase, TransportName } from '../shared/transport/index.js';

/** What every benchmark's backends are built with: the tests' short retry ladder. */
export const BENCH_BACKEND: BackendBase = {
  budget: TEST_RETRY_BUDGET,
  retention: DEFAULT_RETENTION,
  consumer: 'bench',
};

/**
 * Runs one benchmark in a scratch environment of its own (a migrated database, a virtual host
 * and a namespace on each of `transports` (default: all), an SQS prefix on `sqsEndpoint`), removed
 * afterwards.
 */
export async function withBenchEnvironment<T>(
  env: Env,
  label: string,
  fn: (scratch: ScratchEnvironment) => Promise<T>,
  options: { poolSize?: number; transports?: readonly TransportName[]; sqsEndpoint?: string } = {},
): Promise<T> {
  const scratch = await createScratch(
    {
      databaseUrl: env.DATABASE_URL,
      amqpUrl: env.AMQP_URL,
      managementUrl: env.RABBITMQ_MANAGEMENT_URL,
      sqsEndpoint: options.sqsEndpoint,
    },
    `bench_${label}`,
    {
      ...(options.poolSize !== undefined ? { poolSize: options.poolSize } : {}),
      ...(options.transports ? { transports: options.transports } : {}),
    },
  );
  try {
    return await fn(scratch);
  } finally {
    await scratch.close();
  }
}

/** Resolves once the consumer has acknowledged `count` messages (read from its journal). */
export function untilAcked(journal: Journal, count: number): Promise<void> {
  let acked = 0;
  return new Promise<void>((resolve) => {
    journal.addSink((e) => {
      if (e.step === 'acked' && ++acked === count) resolve();
    });
  });
}
