import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Files that take minutes though they are small (child processes, the soak, the deployed bundles).
 * Without an earlier run's durations (a fresh clone, as in CI) Vitest starts the largest files
 * first, so these would start last and run alone at the end; they start first instead.
 */
const LONG_FILES = [
  'lab.processes',
  'cdk.moto',
  'soak.smoke',
  'bundles.pause',
  'redrive.test',
  'lab.rabbitmq',
  'peers.sqs',
  'redrive.moveTask',
];

class LongFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => {
      const i = LONG_FILES.findIndex((name) => f.moduleId.includes(`/${name}.`));
      return i < 0 ? LONG_FILES.length : i;
    };
    // a stable sort: the rest keep Vitest's order
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  test: {
    // The integration tests mostly wait on brokers, emulators and timers (the suite keeps about
    // one of two cores busy): four files at a time on a 2-core machine (Vitest's default there is
    // one) keeps it well under CI's budget. Every test file is isolated (own database, vhost,
    // queue prefix), so this is safe.
    maxWorkers: 4,
    sequence: { sequencer: LongFilesFirst },
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
