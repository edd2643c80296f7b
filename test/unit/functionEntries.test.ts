import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Every Lambda entry point that opens transactions on the shared database rolls them back before
 * the function times out (`transactionDeadline`): a timed-out invocation runs nothing of ours, and
 * through the Data API its transaction and row locks would stay for the Data API's timeout.
 */
const FUNCTIONS = join(import.meta.dirname, '..', '..', 'functions');

/** Entry points on the shared database that open no transaction, and why. */
const NO_TRANSACTIONS: Record<string, string> = {
  // runMaintenance: each batched DELETE is its own autocommit statement.
  maintenance: 'autocommit statements only',
};

const entries = readdirSync(FUNCTIONS, { withFileTypes: true })
  .filter((d) => d.isDirectory() && d.name !== 'commons')
  .map((d) => ({
    name: d.name,
    source: readFileSync(join(FUNCTIONS, d.name, 'index.ts'), 'utf8'),
  }));

describe('function entry points', () => {
  it('finds the entry points (order-results and migrate among them)', () => {
    expect(entries.map((e) => e.name)).toEqual(
      expect.arrayContaining(['order-results-rabbitmq', 'order-results-sqs', 'migrate']),
    );
  });

  it.each(entries.filter((e) => /sharedDb\(\)/.test(e.source)).map((e) => [e.name, e.source]))(
    '%s rolls back its open transactions before the function times out',
    (name, source) => {
      if (name in NO_TRANSACTIONS) {
        expect(source).not.toMatch(/transaction\(/);
        return;
      }
      expect(source).toMatch(/\.use\(\s*transactionDeadline\(\{ db: sharedDb\(\)/);
    },
  );
});
