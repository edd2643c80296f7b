import { DB_SIDES, type DbSide } from '../config/constants.js';
import { ConfigError } from '../config/env.js';
import { checkUsername, type DbLogin, ensureLogin } from './logins.js';
import type { SqlDatabase } from './types.js';

export { DB_SIDES, type DbSide };

/**
 * Each side's NOLOGIN group role (its grants and row policies, migration 0006) and the login user
 * its deployed functions use (the username of its secret, created by the migrate function).
 */
export const DB_ROLES: Readonly<Record<DbSide, { group: string; login: string }>> = {
  orders: { group: 'orders_app', login: 'orders_fn' },
  inventory: { group: 'inventory_app', login: 'inventory_fn' },
  relay: { group: 'relay_app', login: 'relay_fn' },
  maintenance: { group: 'maintenance_app', login: 'maintenance_fn' },
};

/**
 * The legacy group role of migration 0005: row access to every pipeline table. Functions
 * deployed before the per-side logins log in as a member of it until their stack is updated.
 */
export const APP_GROUP_ROLE = 'pipeline_app';

/** The legacy login user of those functions (the username in the data stack's `AppSecret`). */
export const APP_LOGIN_USER = 'pipeline_fn';

/** The example's group roles: no secret may name one. */
export const GROUP_ROLES: ReadonlySet<string> = new Set([
  APP_GROUP_ROLE,
  ...DB_SIDES.map((s) => DB_ROLES[s].group),
]);

/** The legacy login (`pipeline_fn`, a member of {@link APP_GROUP_ROLE}): see {@link ensureLogin}. */
export function ensureAppLogin(
  db: SqlDatabase,
  login: DbLogin,
): Promise<{ username: string; created: boolean }> {
  return ensureLogin(db, login, APP_GROUP_ROLE, GROUP_ROLES);
}

/**
 * Creates or updates the login of every side given, each a member of its side's group role only
 * ({@link DB_ROLES}). Refuses, before changing anything, two sides naming the same user (one
 * login would hold both sides' grants) or a side naming `legacy` (the legacy login's user).
 */
export async function ensureServiceLogins(
  db: SqlDatabase,
  logins: Partial<Record<DbSide, DbLogin>>,
  options: { legacy?: string } = {},
): Promise<Partial<Record<DbSide, { username: string; created: boolean }>>> {
  const given = DB_SIDES.flatMap((side) => {
    const login = logins[side];
    return login ? [{ side, login }] : [];
  });
  const seen = new Map<string, DbSide>();
  for (const { side, login } of given) {
    checkUsername(login.username);
    const other = seen.get(login.username);
    if (other) {
      throw new ConfigError(
        `database logins: ${other} and ${side} both name "${login.username}": each side needs a user of its own`,
      );
    }
    if (login.username === options.legacy) {
      throw new ConfigError(
        `database logins: ${side} names "${login.username}", the legacy login: each side needs a user of its own`,
      );
    }
    seen.set(login.username, side);
  }
  const out: Partial<Record<DbSide, { username: string; created: boolean }>> = {};
  for (const { side, login } of given) {
    out[side] = await ensureLogin(db, login, DB_ROLES[side].group, GROUP_ROLES);
  }
  return out;
}
