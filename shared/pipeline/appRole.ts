import {
  ConfigError,
  checkUsername,
  type DbLogin,
  ensureLogin,
  type SqlDatabase,
} from '../index.js';
import { DB_SIDES, type DbSide } from './constants.js';

export { DB_SIDES, type DbSide };

/**
 * Each side's NOLOGIN group role (its grants and row policies: the services' `_roles` migrations;
 * roles belong to the cluster, so one group serves both databases) and the login user its
 * deployed functions use (the username of its secret, created by the migrate function).
 */
export const DB_ROLES: Readonly<Record<DbSide, { group: string; login: string }>> = {
  orders: { group: 'orders_app', login: 'orders_fn' },
  inventory: { group: 'inventory_app', login: 'inventory_fn' },
  relay: { group: 'relay_app', login: 'relay_fn' },
  maintenance: { group: 'maintenance_app', login: 'maintenance_fn' },
};

/** The example's group roles: no secret may name one. */
export const GROUP_ROLES: ReadonlySet<string> = new Set(DB_SIDES.map((s) => DB_ROLES[s].group));

/**
 * Creates or updates the login of every side given, each a member of its side's group role only
 * ({@link DB_ROLES}). Refuses, before changing anything, two sides naming the same user (one
 * login would hold both sides' grants). Roles belong to the cluster: run once, in either database.
 */
export async function ensureServiceLogins(
  db: SqlDatabase,
  logins: Partial<Record<DbSide, DbLogin>>,
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
    seen.set(login.username, side);
  }
  const out: Partial<Record<DbSide, { username: string; created: boolean }>> = {};
  for (const { side, login } of given) {
    out[side] = await ensureLogin(db, login, DB_ROLES[side].group, GROUP_ROLES);
  }
  return out;
}
