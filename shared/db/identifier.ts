import { ConfigError } from '../config/errors.js';

/** PostgreSQL's longest identifier, in bytes (NAMEDATALEN - 1). */
export const MAX_IDENTIFIER = 63;

/**
 * PostgreSQL's reserved key words (`pg_get_keywords()`, categories R and T, as of PostgreSQL 15):
 * none of them names a table unquoted, and the outbox's statements use the name unquoted.
 */
const RESERVED = new Set(
  `all analyse analyze and any array as asc asymmetric authorization binary both case cast check
  collate collation column concurrently constraint create cross current_catalog current_date
  current_role current_schema current_time current_timestamp current_user default deferrable desc
  distinct do else end except false fetch for foreign freeze from full grant group having ilike in
  initially inner intersect into is isnull join lateral leading left like limit localtime
  localtimestamp natural not notnull null offset on only or order outer overlaps placing primary
  references returning right select session_user similar some symmetric table tablesample then to
  trailing true union unique user using variadic verbose when where window with`.split(/\s+/),
);

/**
 * Why `name` cannot be put into SQL text unquoted as a table name (the library's statements do),
 * or undefined when it can: plain, lower-case, at most 63 bytes, not a reserved key word.
 */
export function identifierProblem(name: string): string | undefined {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name))
    return 'is not a plain lower-case SQL identifier ([a-z_][a-z0-9_]*, at most 63 characters)';
  if (RESERVED.has(name)) return 'is a reserved SQL key word';
  return undefined;
}

/** `name` when it can name a table unquoted; a `ConfigError` naming `what` otherwise. */
export function sqlIdentifier(name: string, what: string): string {
  const problem = identifierProblem(name);
  if (problem) throw new ConfigError(`${what} ${JSON.stringify(name)} ${problem}`);
  return name;
}
