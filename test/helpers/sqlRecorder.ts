import type { QueryResult, SqlExecutor, SqlParam } from '../../shared/index.js';

/** An executor that records the statements it is given and answers none (no database). */
export function sqlRecorder(): {
  ex: SqlExecutor;
  seen: { sql: string; params?: readonly SqlParam[] }[];
} {
  const seen: { sql: string; params?: readonly SqlParam[] }[] = [];
  const ex: SqlExecutor = {
    async query<T extends object>(sql: string, params?: readonly SqlParam[]) {
      seen.push({ sql, params });
      return { rows: [], rowCount: 0 } as QueryResult<T>;
    },
  };
  return { ex, seen };
}
