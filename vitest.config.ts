import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // The integration tests mostly wait on brokers, emulators and timers (the suite keeps about
    // one of two cores busy): four files at a time on a 2-core machine (Vitest's default there is
    // one) keeps it well under CI's budget. Every test file is isolated (own database, vhost,
    // queue prefix), so this is safe.
    maxWorkers: 4,
    env: { POWERTOOLS_LOG_LEVEL: 'SILENT', POWERTOOLS_DEV: 'false' },
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'test/contract/memory.contract.test.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'infra',
          include: ['test/infra/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/contract/**/*.test.ts'],
          exclude: ['test/contract/memory.contract.test.ts'],
          globalSetup: ['test/globalSetup.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
