import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { splitStatements } from '../../shared/db/statements.js';
import { ConfigError, INBOX_TABLE, libraryMigrations } from '../../shared/index.js';

describe('libraryMigrations', () => {
  it('accepts plain lower-case identifiers up to 43 characters', () => {
    const names = ['shipping_outbox', '_x', 'a', 'outbox', 'x1_2', 'values', 'a'.repeat(43)];
    for (const name of names) {
      expect(libraryMigrations({ outboxes: [name] }).map((m) => m.name)).toContain(
        `0000_rms_outbox_${name}`,
      );
    }
  });

  it('refuses any other outbox name with a ConfigError naming it', () => {
    const bad: [string, RegExp][] = [
      ['', /not a plain lower-case SQL identifier/],
      ['Shipping', /not a plain lower-case SQL identifier/],
      ['1outbox', /not a plain lower-case SQL identifier/],
      ['ship-outbox', /not a plain lower-case SQL identifier/],
      ['public.outbox', /not a plain lower-case SQL identifier/],
      ['outbox; DROP TABLE orders', /not a plain lower-case SQL identifier/],
      ['"outbox"', /not a plain lower-case SQL identifier/],
      ['outbox ', /not a plain lower-case SQL identifier/],
      ['é', /not a plain lower-case SQL identifier/],
      ['a'.repeat(64), /not a plain lower-case SQL identifier/],
      ['a'.repeat(44), /longer than 43 characters/],
      ['order', /reserved SQL key word/],
      ['user', /reserved SQL key word/],
      ['processed_messages', /already uses/],
      ['schema_migrations', /already uses/],
    ];
    for (const [name, reason] of bad) {
      const call = () => libraryMigrations({ outboxes: ['shipping_outbox', name] });
      expect(call, name).toThrow(ConfigError);
      expect(call, name).toThrow(reason);
      expect(call, name).toThrow(`outbox table ${JSON.stringify(name)}`);
    }
    expect(() => libraryMigrations({ outboxes: ['a_outbox', 'b_outbox', 'a_outbox'] })).toThrow(
      /outbox table "a_outbox" is listed twice/,
    );
  });

  it('names each migration to sort before a service’s own, in the order they are returned', () => {
    const all = libraryMigrations({ outboxes: ['shipping_outbox', 'billing_outbox'] });
    const names = all.map((m) => m.name);
    expect(names).toEqual([
      '0000_rms_inbox',
      '0000_rms_outbox_billing_outbox',
      '0000_rms_outbox_shipping_outbox',
    ]);
    expect([...names].sort()).toEqual(names);
    // the form loadMigrations reads from files, and before a service's first one
    for (const name of names) {
      expect(`${name}.sql`).toMatch(/^\d{4}_[a-z0-9_]+\.sql$/);
      expect(name < '0001_').toBe(true);
    }
    expect(libraryMigrations({ outboxes: ['shipping_outbox'], inbox: false })).toEqual([all[2]]);
    expect(libraryMigrations({ outboxes: [] }).map((m) => m.name)).toEqual(['0000_rms_inbox']);
  });

  it('creates the inbox Inbox writes and the outbox under the name given, with derived index names', () => {
    const [inbox, outbox] = libraryMigrations({ outboxes: ['shipping_outbox'] });
    expect(inbox?.sql).toContain(`CREATE TABLE ${INBOX_TABLE} (`);
    expect(outbox?.sql).toContain('CREATE TABLE shipping_outbox (');
    for (const index of ['unpublished_idx', 'needs_attention_idx', 'published_at_idx']) {
      expect(outbox?.sql).toContain(`CREATE INDEX shipping_outbox_${index} ON shipping_outbox `);
    }
    expect(outbox?.sql).not.toMatch(/\boutbox_/);
    for (const m of [inbox, outbox]) {
      // one statement per call on the Data API
      expect(splitStatements(m?.sql ?? '').length).toBeGreaterThan(1);
    }
  });

  it('keeps every migration’s SQL, so that databases that applied it accept it again', () => {
    // A database recorded these checksums: a change here makes `migrate` refuse it. Change a
    // library table with a new migration instead, and leave these as they are.
    const checksums = Object.fromEntries(
      libraryMigrations({ outboxes: ['shipping_outbox', 'outbox'] }).map((m) => [
        m.name,
        m.checksum,
      ]),
    );
    expect(checksums).toEqual({
      '0000_rms_inbox': 'a9b1504cf73ad036f100359aa0415d05f4387d75d2fb0636e6c7a7b746443a37',
      '0000_rms_outbox_outbox': '8f6a9330cf36bdc7686125c056c026d5bf759774b970a95c59535fd398f6d4df',
      '0000_rms_outbox_shipping_outbox':
        '08a62dd8492e62da2f73c98041010021aa75a6ab9ecfa0f4266436f11df71c79',
    });
    for (const m of libraryMigrations({ outboxes: ['shipping_outbox'] })) {
      expect(m.checksum).toBe(createHash('sha256').update(m.sql).digest('hex'));
    }
  });
});
