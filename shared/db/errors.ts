/**
 * One error hierarchy for the SQL port. Adapters map driver errors to these classes so use cases
 * and retry classification never look at driver codes.
 */
export class DbError extends Error {
  /** SQLSTATE when the database reported one. */
  readonly code: string | undefined;
  constructor(message: string, options?: ErrorOptions & { code?: string | undefined }) {
    super(message, options);
    this.name = 'DbError';
    this.code = options?.code;
  }
}

/** A unique constraint was violated (SQLSTATE 23505). */
export class UniqueViolationError extends DbError {
  readonly constraint: string | undefined;
  constructor(message: string, options?: ErrorOptions & { code?: string; constraint?: string }) {
    super(message, options);
    this.name = 'UniqueViolationError';
    this.constraint = options?.constraint;
  }
}

/** A CHECK / NOT NULL / foreign key rule refused the change (SQLSTATE class 23, other than 23505). */
export class ConstraintViolationError extends DbError {
  readonly constraint: string | undefined;
  constructor(message: string, options?: ErrorOptions & { code?: string; constraint?: string }) {
    super(message, options);
    this.name = 'ConstraintViolationError';
    this.constraint = options?.constraint;
  }
}

/**
 * The same work may succeed if tried again later: serialization failure, deadlock, connection
 * lost or refused, admin shutdown, a paused Aurora cluster resuming.
 */
export class TransientDbError extends DbError {
  constructor(message: string, options?: ErrorOptions & { code?: string }) {
    super(message, options);
    this.name = 'TransientDbError';
  }
}

/**
 * A paused Aurora Serverless v2 cluster is resuming (the Data API's `DatabaseResumingException`):
 * the call was refused and started the resume; the same work succeeds a few seconds later.
 */
export class DatabaseResumingError extends TransientDbError {
  constructor(message: string, options?: ErrorOptions & { code?: string }) {
    super(message, options);
    this.name = 'DatabaseResumingError';
  }
}
