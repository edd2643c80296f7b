import { requireServices } from '../../devkit/preflight.js';
import type { DatabaseLogin } from '../../infra/stackOutputs.js';
import { loadEnv } from '../../shared/config/env.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type { SqlDatabase } from '../../shared/db/types.js';
import { type Service, serviceDatabaseUrls } from '../../shared/pipeline/schema.js';
import { describeStack, OperatorError, stackDatabase } from './stack.js';

export const env = loadEnv();

/** A comma-separated option's values (`--ids a,b`), trimmed, empty ones left out. */
export const list = (v: string) =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/**
 * Where a command's database is: a service's database of a deployed stack (as `login`), or
 * locally (`DATABASE_URL` for orders, `INVENTORY_DATABASE_URL` for inventory).
 */
export interface DbTarget {
  /** `--stack <name>`: the stack's database through the Data API. */
  stack?: string | undefined;
  /** Whose login a deployed stack's database is reached with. */
  login: DatabaseLogin;
  /** Whose database: each service owns one. */
  service: Service;
}

/**
 * Runs `fn` with the command's database: a deployed stack's through the RDS Data API (with the
 * secret of `login`), or a one-connection pool on the service's local database, exiting 2 with a
 * clear line if that is down.
 */
export async function withDb<T>(target: DbTarget, fn: (db: SqlDatabase) => Promise<T>): Promise<T> {
  if (target.stack) {
    const stack = await describeStack(target.stack);
    const { db, close } = stackDatabase(stack, target.login, target.service);
    try {
      return await fn(db);
    } catch (err) {
      throw refusedByDataApi(err, stack.name, target.login) ?? err;
    } finally {
      close();
    }
  }
  const url = serviceDatabaseUrls(env)[target.service];
  await requireServices({ postgres: url });
  const db = new PgDatabase({ connectionString: url, max: 1, applicationName: 'cli' });
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/**
 * The Data API refusing the call itself (not a SQL error, which comes as DatabaseErrorException):
 * no access to the cluster or to the login's secret, a secret it cannot read, credentials that
 * expired. One line, exit 2; anything else is the command's own error.
 */
function refusedByDataApi(err: unknown, stack: string, login: string): OperatorError | undefined {
  const cause = (err as { cause?: { name?: string; message?: string } }).cause;
  const refusals = [
    'BadRequestException',
    'ForbiddenException',
    'AccessDeniedException',
    'UnrecognizedClientException',
    'ExpiredTokenException',
  ];
  if (!cause?.name || !refusals.includes(cause.name)) return undefined;
  return new OperatorError(
    `stack ${stack}: the Data API refused the call as the ${login} login (rds-data on the cluster, secretsmanager:GetSecretValue on its secret?): ${cause.name}: ${cause.message ?? ''}`,
  );
}
