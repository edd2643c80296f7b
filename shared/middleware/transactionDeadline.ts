import type { MiddlewareObj, Request } from '@middy/core';
import type { Context } from 'aws-lambda';
import { isDeadlineAware, type Logger, type SqlDatabase } from '../index.js';

export interface TransactionDeadlineOptions {
  db: SqlDatabase;
  /** How long before the function's timeout open transactions are rolled back (ms). */
  marginMs?: number;
  logger?: Logger;
}

/** Default margin: a RollbackTransaction call or a socket close takes well under a second. */
export const DEFAULT_DEADLINE_MARGIN_MS = 1_000;

/**
 * Rolls back the invocation's open transactions before the function times out. When Lambda
 * times out an invocation it stops the code without running anything of ours, and nothing rolls
 * back: through the Data API the transaction and its locks would stay for 3 minutes. So, at
 * `getRemainingTimeInMillis() - marginMs`, while the runtime still runs, every open transaction
 * is rolled back (Data API: RollbackTransaction; node-postgres: the connection is closed), and
 * until then no transaction's bounds (`SET LOCAL` timeouts) reach past that deadline.
 */
export function transactionDeadline(options: TransactionDeadlineOptions): MiddlewareObj {
  const { db } = options;
  const marginMs = options.marginMs ?? DEFAULT_DEADLINE_MARGIN_MS;
  let timer: NodeJS.Timeout | undefined;
  const clear = () => {
    clearTimeout(timer);
    timer = undefined;
    if (isDeadlineAware(db)) db.setDeadline(undefined);
  };
  const transactionDeadlineBefore = (request: Request<unknown, unknown, Error, Context>) => {
    if (!isDeadlineAware(db)) return;
    clear();
    const left = request.context.getRemainingTimeInMillis() - marginMs;
    db.setDeadline(Date.now() + left);
    timer = setTimeout(
      () => {
        // the invocation is over for the database: a late transaction gets the static bounds only
        db.setDeadline(undefined);
        void db.abortTransactions('the function is about to time out').then((n) => {
          if (n > 0) {
            options.logger?.warn('transactions rolled back before the function timeout', {
              transactions: n,
              marginMs,
            });
          }
        });
      },
      Math.max(0, left),
    );
    timer.unref();
  };
  return {
    before: transactionDeadlineBefore,
    after: clear,
    onError: clear,
  };
}
