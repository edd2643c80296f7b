import { createHash } from 'node:crypto';
import { ConfigError } from '../config/errors.js';
import { identifierProblem, MAX_IDENTIFIER } from './identifier.js';
import type { Migration } from './migrate.js';

export interface LibraryMigrationsOptions {
  /**
   * The outbox tables to create, one per stream the service publishes: plain lower-case SQL
   * identifiers (`[a-z_][a-z0-9_]*`), not reserved words, at most 43 characters so that the
   * longest index name (`<table>_needs_attention_idx`) fits PostgreSQL's 63.
   */
  outboxes: readonly string[];
  /** Create the inbox (`processed_messages`). Default true; false for a service that only publishes. */
  inbox?: boolean;
}

/** The inbox table `Inbox` writes (`INBOX_TABLE` of the consumer layer). */
const INBOX = 'processed_messages';

/** The longest suffix of an index name derived from an outbox's name. */
const LONGEST_INDEX_SUFFIX = '_needs_attention_idx';

/** Names the migrations leave to nobody else: the inbox and `migrate`'s own table. */
const TAKEN = new Set([INBOX, 'schema_migrations']);

/** The migration name's prefix: sorts before a service's own `0001_…` files. */
const PREFIX = '0000_rms_';

function migration(name: string, sql: string): Migration {
  return { name, sql, checksum: createHash('sha256').update(sql).digest('hex') };
}

/** Why `table` cannot name an outbox, or undefined when it can. */
function badOutboxName(table: string): string | undefined {
  const plain = identifierProblem(table);
  if (plain) return plain;
  if (table.length + LONGEST_INDEX_SUFFIX.length > MAX_IDENTIFIER)
    return `is longer than ${MAX_IDENTIFIER - LONGEST_INDEX_SUFFIX.length} characters (its index names would not fit ${MAX_IDENTIFIER})`;
  if (TAKEN.has(table)) return 'is a table the library or migrate already uses';
  return undefined;
}

// The SQL below is what databases recorded (their checksums): never edit it, not even a space.
// A later change to these tables comes as a migration of its own.

const INBOX_SQL = `CREATE TABLE ${INBOX} (
  consumer_name text        NOT NULL CHECK (consumer_name <> ''),
  message_id    uuid        NOT NULL,
  processed_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer_name, message_id)
);
CREATE INDEX ${INBOX}_processed_at_idx ON ${INBOX} (processed_at);
`;

const outboxSql = (t: string) => `CREATE TABLE ${t} (
  id                 uuid        PRIMARY KEY,
  event_type         text        NOT NULL CHECK (event_type <> ''),
  schema_version     text        NOT NULL CHECK (schema_version ~ '^[0-9]+\\.[0-9]+$'),
  aggregate_type     text        NOT NULL,
  aggregate_id       text        NOT NULL,
  aggregate_version  integer     NOT NULL CHECK (aggregate_version >= 1),
  payload            jsonb       NOT NULL,
  producer           text        NOT NULL,
  correlation_id     text        NOT NULL,
  causation_id       text,
  occurred_at        timestamptz NOT NULL DEFAULT now(),
  published_at       timestamptz,
  attempts           integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at    timestamptz NOT NULL DEFAULT now(),
  last_error         text,
  needs_attention_at timestamptz,
  trace_id           text        CHECK (length(trace_id) BETWEEN 1 AND 128),
  UNIQUE (aggregate_type, aggregate_id, aggregate_version),
  CHECK (published_at IS NULL OR needs_attention_at IS NULL)
);
CREATE INDEX ${t}_unpublished_idx ON ${t} (occurred_at)
  WHERE published_at IS NULL AND needs_attention_at IS NULL;
CREATE INDEX ${t}_needs_attention_idx ON ${t} (needs_attention_at)
  WHERE needs_attention_at IS NOT NULL AND published_at IS NULL;
CREATE INDEX ${t}_published_at_idx ON ${t} (published_at) WHERE published_at IS NOT NULL;
`;

/**
 * The tables the library itself reads and writes, as migrations to apply before a service's own:
 * `migrate(db, [...libraryMigrations({ outboxes: ['shipping_outbox'] }), ...theirOwn])`.
 *
 * - `0000_rms_inbox`: the inbox `processed_messages` (`Inbox`: one row per consumer name and
 *   message id; an index on `processed_at` for deleting old rows by age).
 * - `0000_rms_outbox_<table>`, one per outbox: the table `OutboxStore` writes and `OutboxRelay`
 *   claims and marks, with the partial indexes the claim and the attention queries read
 *   (`<table>_unpublished_idx`, `<table>_needs_attention_idx`) and the one that finds published
 *   rows by age (`<table>_published_at_idx`).
 *
 * Each is the shape of the example application's own (`processed_messages`, `outbox`), which an
 * integration test holds them to. The list is in the order `migrate` applies it, which is also the
 * names' lexical order (outboxes sorted by name). The SQL of a name never changes, so the
 * checksums stay those a database recorded, whatever the library's version; an outbox added
 * later is a migration of its own. Grants and row-level security are the service's, in its own
 * migrations (docs/outbox-relay.md, "The library's tables", shows a least-privilege set).
 *
 * Throws `ConfigError` for an outbox name that is not a plain lower-case identifier, is reserved,
 * too long for its index names, the inbox's, or given twice.
 */
export function libraryMigrations(options: LibraryMigrationsOptions): Migration[] {
  const seen = new Set<string>();
  for (const table of options.outboxes) {
    const bad = badOutboxName(table);
    if (bad) throw new ConfigError(`outbox table ${JSON.stringify(table)} ${bad}`);
    if (seen.has(table)) throw new ConfigError(`outbox table "${table}" is listed twice`);
    seen.add(table);
  }
  return [
    ...(options.inbox === false ? [] : [migration(`${PREFIX}inbox`, INBOX_SQL)]),
    ...[...seen].sort().map((t) => migration(`${PREFIX}outbox_${t}`, outboxSql(t))),
  ];
}
