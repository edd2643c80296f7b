import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Every Lambda entry point that opens transactions on a service's database rolls them back before
 * the function times out (`transactionDeadline`, once per database it reaches): a timed-out
 * invocation runs nothing of ours, and through the Data API its transaction and row locks would
 * stay for the Data API's timeout.
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

  const onDatabase = entries.filter((e) => /\b(sharedDb|serviceDb)\(/.test(e.source));

  it('finds the entry points that reach a database', () => {
    expect(onDatabase.map((e) => e.name)).toEqual(
      expect.arrayContaining(['outbox-relay', 'place-order', 'reserve-inventory-sqs']),
    );
  });

  it.each(onDatabase.map((e) => [e.name, e.source]))(
    '%s rolls back its open transactions before the function times out, on each database',
    (name, source) => {
      if (name in NO_TRANSACTIONS) {
        expect(source).not.toMatch(/transaction\(/);
        return;
      }
      const databases = source.match(/\b(sharedDb|serviceDb)\(/g)?.length ?? 0;
      const deadlines = source.match(/\.use\(\s*transactionDeadline\(\{ db/g)?.length ?? 0;
      expect(deadlines).toBe(databases);
    },
  );
});
