import { z } from 'zod';
import { ConfigError } from '../config/env.js';
import { DbError } from './errors.js';
import type { SqlDatabase } from './types.js';

/**
 * The NOLOGIN group role migration 0005 creates: row access to the pipeline's tables, no DDL, no
 * TRUNCATE. Every function except migrate logs in as a member of it.
 */
export const APP_GROUP_ROLE = 'pipeline_app';

/** The login user of the deployed functions (the username in the app secret CDK generates). */
export const APP_LOGIN_USER = 'pipeline_fn';

/**
 * A database secret as Secrets Manager holds it: the RDS Data API reads `username` and
 * `password` from it (CDK's `DatabaseSecret` adds engine, host, port and dbname, unused here).
 */
const dbSecretSchema = z.object({ username: z.string().min(1), password: z.string().min(1) });
export type DbLogin = z.infer<typeof dbSecretSchema>;

export function parseDbSecret(secretString: string | undefined): DbLogin {
  let json: unknown;
  try {
    json = JSON.parse(secretString ?? '');
  } catch {
    throw new ConfigError('database secret: not JSON (expected {"username","password",…})');
  }
  const parsed = dbSecretSchema.safeParse(json);
  if (!parsed.success) {
    const fields = parsed.error.issues.map((i) => i.path.join('.') || '(root)').join(', ');
    throw new ConfigError(`database secret: missing or empty ${fields}`);
  }
  return parsed.data;
}

// An unquoted PostgreSQL identifier: what CDK generates and what a reader recognises in psql.
const USERNAME = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * Creates the functions' login user, or sets its password to the secret's (every deploy, so a
 * secret changed by hand or by rotation is what the database has), and makes it a member of
 * {@link APP_GROUP_ROLE}. Runs as the migrating role (the Aurora master user) after the
 * migrations. Refuses the migrating role itself and superusers: the app secret must name a
 * user of its own. The statements are built by the server (`format` with `%I` / `%L`), so no
 * value is ever spliced into SQL here.
 */
export async function ensureAppLogin(
  db: SqlDatabase,
  login: DbLogin,
): Promise<{ username: string; created: boolean }> {
  if (!USERNAME.test(login.username)) {
    throw new ConfigError(
      `database app user "${login.username}": expected a lower-case identifier (a-z, 0-9, _)`,
    );
  }
  return db.transaction(async (tx) => {
    const { rows: group } = await tx.query('SELECT 1 FROM pg_roles WHERE rolname = $1::text', [
      APP_GROUP_ROLE,
    ]);
    if (group.length === 0) {
      throw new DbError(`role ${APP_GROUP_ROLE} does not exist: run the migrations first`);
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
        `database app user "${login.username}" is ${login.username === me ? 'the migrating role' : 'a superuser'}: the app secret must name a user of its own`,
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
        login.password,
        APP_GROUP_ROLE,
      ],
    );
    await tx.query(stmt[0]?.create ?? '');
    await tx.query(stmt[0]?.grant ?? '');
    return { username: login.username, created };
  });
}
