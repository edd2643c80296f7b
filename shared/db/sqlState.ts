import {
  ConstraintViolationError,
  DbError,
  TransientDbError,
  UniqueViolationError,
} from './errors.js';

/** SQLSTATEs after which the same statement may succeed later. */
const TRANSIENT_SQLSTATES = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '53300', // too_many_connections
  '55P03', // lock_not_available
  '57014', // query_canceled (statement_timeout)
]);

/** Maps a PostgreSQL SQLSTATE to the SQL port's error classes (shared by every adapter). */
export function mapSqlState(
  code: string | undefined,
  message: string,
  cause: unknown,
  constraint?: string,
): DbError {
  if (code === '23505')
    return new UniqueViolationError(message, {
      cause,
      code,
      ...(constraint ? { constraint } : {}),
    });
  if (code?.startsWith('23')) {
    return new ConstraintViolationError(message, {
      cause,
      code,
      ...(constraint ? { constraint } : {}),
    });
  }
  if (code !== undefined && (TRANSIENT_SQLSTATES.has(code) || code.startsWith('08'))) {
    return new TransientDbError(message, { cause, code });
  }
  return new DbError(message, { cause, code });
}
