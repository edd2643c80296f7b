import { ConfigError } from '../config/errors.js';

/** A table name the library puts into SQL text: plain, lower-case, unquoted, at most 63 bytes. */
export const SQL_IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/** `name` when it is a plain SQL identifier; a `ConfigError` naming `what` otherwise. */
export function sqlIdentifier(name: string, what: string): string {
  if (!SQL_IDENTIFIER.test(name)) {
    throw new ConfigError(
      `${what} "${name}" is not a plain lower-case SQL identifier (letters, digits, _; at most 63)`,
    );
  }
  return name;
}
