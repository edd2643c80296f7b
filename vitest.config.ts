import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
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
