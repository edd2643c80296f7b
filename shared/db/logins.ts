import { type Credentials, parseCredentials } from '../config/credentials.js';
import { ConfigError } from '../config/env.js';
import { DbError } from './errors.js';
import { scramSha256Verifier } from './scram.js';
import type { SqlDatabase } from './types.js';

/**
 * Database logins: a user of its own per secret, a member of one NOLOGIN group role that holds
 * the grants. The migrate function creates or updates them on every deploy.
 */

/** A database login's secret: the RDS Data API reads `username` and `password` from it. */
export type DbLogin = Credentials;

export function parseDbSecret(secretString: string | undefined): DbLogin {
  return parseCredentials(secretString, 'database secret');
}

// An unquoted PostgreSQL identifier: what CDK generates and what a reader recognises in psql.
const USERNAME = /^[a-z_][a-z0-9_]{0,62}$/;

export function checkUsername(username: string): void {
  if (!USERNAME.test(username)) {
    throw new ConfigError(
      `database login "${username}": expected a lower-case identifier (a-z, 0-9, _)`,
    );
  }
}

/**
 * Creates a login user, or sets its password to the secret's (every deploy, so a secret changed
 * by hand or by rotation is what the database has), and makes it a member of `group`. Runs as the
 * migrating role (the Aurora master user) after the migrations. Refuses the migrating role
 * itself, superusers and the group roles: each secret must name a user of its own.
 *
 * The password travels as its SCRAM-SHA-256 verifier, computed here ({@link scramSha256Verifier}):
 * PostgreSQL stores a verifier as it is, so the password never reaches the server, its statement
 * log or `pg_stat_statements`. The statements are built by the server (`format` with `%I` /
 * `%L`), so no value is spliced into SQL here.
 */
export async function ensureLogin(
  db: SqlDatabase,
  login: DbLogin,
  group: string,
  /** Group roles no secret may name (besides `group`). */
  groupRoles: ReadonlySet<string> = new Set(),
): Promise<{ username: string; created: boolean }> {
  checkUsername(login.username);
  if (login.username === group || groupRoles.has(login.username)) {
    throw new ConfigError(
      `database login "${login.username}" is a group role: the secret must name a user of its own`,
    );
  }
  let verifier: string;
  try {
    verifier = scramSha256Verifier(login.password);
  } catch (err) {
    throw new ConfigError(`database login "${login.username}": ${(err as Error).message}`);
  }
  return db.transaction(async (tx) => {
    const { rows: groups } = await tx.query('SELECT 1 FROM pg_roles WHERE rolname = $1::text', [
      group,
    ]);
    if (groups.length === 0) {
      throw new DbError(`role ${group} does not exist: run the migrations first`);
    }
    const { rows } = await tx.query<{ me: string; super: boolean | null }>(
      `SELECT current_user::text AS me,
              (SELECT rolsuper FROM pg_roles WHERE rolname = $1::text) AS super`,
      [login.username],
    );
    const me = rows[0]?.me;
    const isSuper = rows[0]?.super ?? null;
    if (login.username === me || isSuper === true) {
      throw new ConfigError(
        `database login "${login.username}" is ${login.username === me ? 'the migrating role' : 'a superuser'}: the secret must name a user of its own`,
      );
    }
    const created = isSuper === null;
    const { rows: stmt } = await tx.query<{ create: string; grant: string }>(
      `SELECT format($1::text, $2::text, $3::text) AS create,
              format('GRANT %I TO %I', $4::text, $2::text) AS grant`,
      [
        created
          ? 'CREATE ROLE %I WITH LOGIN INHERIT PASSWORD %L'
          : 'ALTER ROLE %I WITH LOGIN INHERIT PASSWORD %L',
        login.username,
        verifier,
        group,
      ],
    );
    await tx.query(stmt[0]?.create ?? '');
    await tx.query(stmt[0]?.grant ?? '');
    return { username: login.username, created };
  });
}

/**
 * Retires a login user: it can no longer log in, its password is removed and it leaves every
 * group role (sessions already open finish their work; nothing is dropped, so `ensureLogin` can
 * bring it back). Returns false when there is no such user. Refuses the migrating role,
 * superusers and the group roles.
 */
export async function retireLogin(
  db: SqlDatabase,
  username: string,
  /** Group roles it refuses to retire. */
  groupRoles: ReadonlySet<string> = new Set(),
): Promise<boolean> {
  checkUsername(username);
  if (groupRoles.has(username)) {
    throw new ConfigError(`database login "${username}" is a group role, not a login`);
  }
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<{ me: string; super: boolean | null }>(
      `SELECT current_user::text AS me,
              (SELECT rolsuper FROM pg_roles WHERE rolname = $1::text) AS super`,
      [username],
    );
    const isSuper = rows[0]?.super ?? null;
    if (isSuper === null) return false;
    if (username === rows[0]?.me || isSuper) {
      throw new ConfigError(`database login "${username}" is the migrating role or a superuser`);
    }
    const { rows: stmt } = await tx.query<{ sql: string }>(
      `SELECT format('ALTER ROLE %I WITH NOLOGIN PASSWORD NULL', $1::text) AS sql
       UNION ALL
       SELECT format('REVOKE %I FROM %I', g.rolname, $1::text)
         FROM pg_auth_members m
         JOIN pg_roles g ON g.oid = m.roleid
         JOIN pg_roles r ON r.oid = m.member
        WHERE r.rolname = $1::text`,
      [username],
    );
    for (const s of stmt) await tx.query(s.sql);
    return true;
  });
}
