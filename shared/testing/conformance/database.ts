import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { TransientDbError } from '../../db/errors.js';
import { PgDatabase } from '../../db/pg/PgDatabase.js';
import type { TransactionOptions } from '../../db/transactionBounds.js';
import type { QueryResult, Row, SqlDatabase, SqlExecutor, SqlParam } from '../../db/types.js';
import { currentBatch, idOf, type Recorder } from './recorder.js';

/** A service the kit cannot use, with what to do about it. */
export class ServiceError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ServiceError';
  }
}

/** A short, unique, lower-case name (a database, a vhost, a queue or stream prefix). */
export function scratchName(scenario: string): string {
  return `rmsc_${scenario.replace(/[^a-z0-9]+/g, '_')}_${randomBytes(4).toString('hex')}`;
}

const withDatabase = (url: string, database: string) => {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
};

const hostOf = (url: string) => {
  const u = new URL(url);
  return `${u.hostname}:${u.port || '5432'}`;
};

/** Runs `fn` on a client of the database `url` names (the one the user gave). */
async function onServer<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
  } catch (err) {
    throw new ServiceError(
      `PostgreSQL at ${hostOf(url)} does not answer (${(err as Error).message}): set DATABASE_URL`,
      { cause: err },
    );
  }
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Checks that PostgreSQL answers and that its user may create databases. */
export async function checkDatabaseServer(url: string): Promise<void> {
  await onServer(url, async (c) => {
    const { rows } = await c.query<{ ok: boolean }>(
      'SELECT rolcreatedb OR rolsuper AS ok FROM pg_roles WHERE rolname = current_user',
    );
    if (!rows[0]?.ok) {
      throw new ServiceError(
        `the PostgreSQL user of DATABASE_URL may not create databases: the kit creates one per scenario (ALTER ROLE … CREATEDB)`,
      );
    }
  });
}

export interface ScratchDatabase {
  name: string;
  url: string;
  db: PgDatabase;
  drop(): Promise<void>;
}

/** A new database `name` on the server of `url`, dropped by `drop` (connections ended first). */
export async function createScratchDatabase(url: string, name: string): Promise<ScratchDatabase> {
  await onServer(url, (c) => c.query(`CREATE DATABASE ${name}`));
  const own = withDatabase(url, name);
  const db = new PgDatabase({ connectionString: own, max: 6, applicationName: name });
  return {
    name,
    url: own,
    db,
    async drop() {
      await db.close().catch(() => {});
      await onServer(url, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

/**
 * What the kit does to the handler's database:
 * - `commit-then-throw`: the transaction commits, then the call fails as a lost connection would
 *   (the handler cannot know its work is done);
 * - `fail-at-commit`: the handler's work ran, then the transaction fails and rolls back;
 * - `outage`: every call fails, as with the database unreachable.
 * A commit fault fires in every transaction made for the batch in which a target message is first
 * handled (the handler cannot tell which of the batch's messages a transaction was for), so the
 * handler fails that batch and the broker delivers it again.
 */
export type DbFault =
  | { kind: 'commit-then-throw' | 'fail-at-commit'; targets: ReadonlySet<string> }
  | { kind: 'outage' };

/** The handler's database: the scenario's, with the kit's faults. */
export class FaultyDatabase implements SqlDatabase {
  fault: DbFault | undefined;
  /** Calls failed by a fault. */
  injected = 0;
  /** Each target message struck, with the batch it was struck in. */
  private readonly struck = new Map<string, readonly unknown[]>();

  constructor(
    private readonly inner: SqlDatabase,
    private readonly recorder: Recorder,
  ) {}

  get resultLimits() {
    return this.inner.resultLimits;
  }

  async query<T extends object = Row>(
    sql: string,
    params?: readonly SqlParam[],
  ): Promise<QueryResult<T>> {
    this.outage('a statement');
    return this.inner.query<T>(sql, params);
  }

  async transaction<T>(
    fn: (tx: SqlExecutor) => Promise<T>,
    options?: TransactionOptions,
  ): Promise<T> {
    this.outage('a transaction');
    const fault = this.fault;
    if (fault?.kind !== 'commit-then-throw' && fault?.kind !== 'fail-at-commit') {
      return this.inner.transaction(fn, options);
    }
    const due = this.due(fault.targets);
    if (due.length === 0) return this.inner.transaction(fn, options);
    if (fault.kind === 'fail-at-commit') {
      return this.inner.transaction(async (tx) => {
        await fn(tx);
        this.fire('COMMIT failed: the transaction rolled back');
        throw new TransientDbError(
          'Connection terminated unexpectedly (the conformance kit failed this COMMIT)',
        );
      }, options);
    }
    await this.inner.transaction(fn, options);
    this.fire('COMMIT succeeded, then the connection failed');
    throw new TransientDbError(
      'Connection terminated unexpectedly (the conformance kit, after COMMIT)',
    );
  }

  /** Target messages of the batch, on the batch they were first handled in. */
  private due(targets: ReadonlySet<string>): string[] {
    const batch = currentBatch.getStore();
    if (!batch) return [];
    const due: string[] = [];
    for (const id of batch.map(idOf)) {
      if (id === null || !targets.has(id)) continue;
      const at = this.struck.get(id);
      if (at === undefined) this.struck.set(id, batch);
      if (at === undefined || at === batch) due.push(id);
    }
    return due;
  }

  /** Target messages struck so far. */
  get struckMessages(): number {
    return this.struck.size;
  }

  /** Stops the faults. */
  heal(): void {
    this.fault = undefined;
  }

  async close(): Promise<void> {
    await this.inner.close();
  }

  /** Records the fault on every message of the batch (the transaction was for them all). */
  private fire(detail: string): void {
    this.injected++;
    for (const m of currentBatch.getStore() ?? []) {
      this.recorder.record({ id: idOf(m), step: 'fault', detail });
    }
  }

  private outage(what: string): void {
    if (this.fault?.kind !== 'outage') return;
    this.injected++;
    for (const m of currentBatch.getStore() ?? []) {
      this.recorder.record({
        id: idOf(m),
        step: 'fault',
        detail: `database unreachable (${what})`,
      });
    }
    throw new TransientDbError('connect ECONNREFUSED (the conformance kit: database outage)', {
      code: 'ECONNREFUSED',
    });
  }
}
