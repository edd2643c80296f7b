import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { mapOutsideQuotes } from '../../shared/db/statements.js';
import { getOrSet } from '../maps.js';
import { closeServer, listen, readBody } from './httpApi.js';

/**
 * A local endpoint that speaks the RDS Data API's wire protocol (REST-JSON: POST /Execute,
 * /BeginTransaction, /CommitTransaction, /RollbackTransaction) over a real PostgreSQL, so the real
 * `@aws-sdk/client-rds-data` can be tested here: no emulator runs SQL (moto returns canned results).
 *
 * What it reproduces of the service (docs/aws-facts.md, RDS Data API): named parameters (`:name`)
 * bound with the type of their field (a `stringValue` without `typeHint` is character varying, so
 * `uuid = :id` fails as it does on AWS and the statement must cast) or of their `typeHint` (UUID,
 * TIMESTAMP, JSON, DECIMAL, DATE, TIME), typed fields in `records` with `columnMetadata`,
 * `numberOfRecordsUpdated`, transactions by id, SQL errors as `DatabaseErrorException` with the
 * SQLSTATE in the message, `TransactionNotFoundException`, one statement per call, JSON requests
 * only, the 4 MiB request limit, the 1 MiB response limit (a larger result fails as
 * `BadRequestException` "Database returned more than the allowed response size limit", and ends
 * the call's transaction), and the expiry of a transaction unused for 3 minutes (or older
 * than 24 hours): it is rolled back and its locks are released. `setResuming(true)` makes every
 * call answer `DatabaseResumingException` (HTTP 400), as a paused Aurora Serverless v2 cluster
 * does while it resumes. Like a cluster, it serves each call on the database its `database`
 * parameter names (`databases`, or that database of `databaseUrl`'s server). With `autoPause`, the cluster pauses by itself as Aurora Serverless v2
 * at 0 ACU does: after `secondsUntilAutoPause` with no call running and no transaction open; the
 * next call starts a resume, and it and every call until the resume ends (`resumeMs`) answer
 * `DatabaseResumingException`. It listens on 127.0.0.1 only. Not reproduced: the 64 KB row limit,
 * refusing a call while the same transaction still runs one, and keeping a transaction begun for
 * a caller that left before the answer (it is rolled back at once: it held only a connection).
 */
export interface DataApiServer {
  endpoint: string;
  /** The address the server listens on (always 127.0.0.1). */
  address: AddressInfo;
  /** While true, every call answers `DatabaseResumingException` (a paused cluster resuming). */
  setResuming(resuming: boolean): void;
  /** Turns the emulated auto-pause on (or changes it), or off (`undefined`: never paused). */
  setAutoPause(options: AutoPauseOptions | undefined): void;
  /**
   * Pauses the cluster now, as if its idle period had just ended (a fault: the next call starts a
   * resume). Calls of transactions already open still run: the service pauses only an instance
   * without connections, so a paused cluster has none. False when it was not running.
   */
  pause(): boolean;
  /** The auto-pause's state and counts (zero when it is off). */
  pauseStats(): PauseStats;
  /** Transactions begun and not yet committed, rolled back or expired. */
  openTransactions(): number;
  close(): Promise<void>;
}

export interface DataApiServerOptions {
  /**
   * The server, and the database of a call that names none (or names this URL's database). A
   * call naming another database is served on that database of the same server, as a cluster
   * serves each of its databases (one that does not exist fails the call), unless `databases`
   * maps the name elsewhere.
   */
  databaseUrl: string;
  /**
   * Where a call naming a database (its `database` parameter) is served, by that name: the local
   * stand-ins of a deployment's databases (`reliable_messaging` → a scratch database).
   */
  databases?: Readonly<Record<string, string>>;
  /** A transaction no call used for this long is rolled back (the service: 3 minutes). */
  transactionIdleTimeoutMs?: number;
  /** Larger requests are refused with 413 (the service: 4 MiB, headers included). */
  maxRequestBytes?: number;
  /**
   * The database user of a call, from the secret it names (`secretArn`), as the service reads
   * `username` and `password` from that Secrets Manager secret. Unset: every call runs as the user
   * of `databaseUrl`. A secret that cannot be read fails the call (`BadRequestException`).
   */
  loginFor?: (secretArn: string) => Promise<{ username: string; password: string }>;
  /** Pause when idle, as a cluster at 0 ACU does (unset: never paused; `setAutoPause` changes it). */
  autoPause?: AutoPauseOptions;
}

function validAutoPause(o: AutoPauseOptions): Required<AutoPauseOptions> {
  const resumeMs = o.resumeMs ?? AURORA_AUTO_PAUSE.resumeMs;
  if (!Number.isFinite(o.secondsUntilAutoPause) || o.secondsUntilAutoPause <= 0) {
    throw new RangeError(`autoPause.secondsUntilAutoPause: ${o.secondsUntilAutoPause} is not > 0`);
  }
  if (!Number.isFinite(resumeMs) || resumeMs < 0) {
    throw new RangeError(`autoPause.resumeMs: ${resumeMs} is not a duration in ms`);
  }
  return { secondsUntilAutoPause: o.secondsUntilAutoPause, resumeMs };
}

/**
 * Aurora Serverless v2's automatic pause, emulated: the cluster pauses once no call ran and no
 * transaction was open for `secondsUntilAutoPause`, and a resume takes `resumeMs`.
 */
export interface AutoPauseOptions {
  /**
   * Idle time before the cluster pauses (s; the service: 300–86,400, default 300). Any positive
   * value here, so that tests can scale time.
   */
  secondsUntilAutoPause: number;
  /** How long a resume takes (ms; default `AURORA_AUTO_PAUSE.resumeMs`). */
  resumeMs?: number;
}

/** Aurora Serverless v2's auto-pause figures (docs/aws-facts.md, Aurora Serverless v2). */
export const AURORA_AUTO_PAUSE = {
  /** `SecondsUntilAutoPause` when a cluster at 0 ACU does not set it (bounds: 300–86,400). */
  defaultSecondsUntilAutoPause: 300,
  /** The resume time AWS gives ("up to 15 seconds", the launch post). */
  resumeMs: 15_000,
} as const;

export interface PauseStats {
  /** `active` (serving), `paused`, or `resuming` (calls refused until the resume ends). */
  state: 'active' | 'paused' | 'resuming';
  pauses: number;
  resumes: number;
  /** Calls answered `DatabaseResumingException` (by a resume, or while `setResuming(true)`). */
  refused: number;
}

/** The service's limits (Aurora UG, BeginTransaction and BatchExecuteStatement API references). */
export const DATA_API_LIMITS = {
  transactionIdleTimeoutMs: 3 * 60_000,
  transactionMaxLifetimeMs: 24 * 3600_000,
  maxRequestBytes: 4 * 1024 * 1024,
  maxResponseBytes: 1024 * 1024,
} as const;

interface Field {
  isNull?: boolean;
  booleanValue?: boolean;
  longValue?: number;
  doubleValue?: number;
  stringValue?: string;
  blobValue?: string;
}

interface SqlParameter {
  name: string;
  value: Field;
  typeHint?: 'UUID' | 'TIMESTAMP' | 'JSON' | 'DECIMAL' | 'DATE' | 'TIME';
}

const TYPE_NAMES: Record<number, string> = {
  16: 'bool',
  20: 'int8',
  21: 'int2',
  23: 'int4',
  25: 'text',
  114: 'json',
  700: 'float4',
  701: 'float8',
  1043: 'varchar',
  1082: 'date',
  1083: 'time',
  1114: 'timestamp',
  1184: 'timestamptz',
  1700: 'numeric',
  2950: 'uuid',
  3802: 'jsonb',
};

const CASTS: Record<string, string> = {
  UUID: '::uuid',
  TIMESTAMP: '::timestamp',
  JSON: '::json',
  DECIMAL: '::numeric',
  DATE: '::date',
  TIME: '::time',
};

/** Rewrites `:name` placeholders to `$n` (with the typeHint's cast), skipping quoted text and `::`. */
export function toPositional(
  sql: string,
  params: SqlParameter[],
): { text: string; values: unknown[] } {
  const index = new Map<string, number>();
  const values: unknown[] = [];
  // `:name`, but not the second colon of a `::type` cast
  const text = mapOutsideQuotes(sql, (code) =>
    code.replace(/(?<!:):([A-Za-z_][A-Za-z0-9_]*)/g, (_m, name: string) => {
      const p = params.find((x) => x.name === name);
      if (!p)
        throw Object.assign(new Error(`No value specified for parameter: ${name}`), {
          sqlState: '07002',
        });
      let n = index.get(name);
      if (n === undefined) {
        values.push(fieldValue(p.value));
        n = values.length;
        index.set(name, n);
      }
      return `$${n}${p.typeHint ? (CASTS[p.typeHint] ?? '') : fieldCast(p.value)}`;
    }),
  );
  return { text, values };
}

/**
 * The type a field is bound with when it has no typeHint, as the service binds it: text as
 * character varying, whole numbers as bigint, others as double precision, booleans as boolean.
 * A null is untyped. A statement that needs another type casts (`:id::uuid`).
 */
function fieldCast(f: Field): string {
  if (f.isNull) return '';
  if (f.booleanValue !== undefined) return '::boolean';
  if (f.longValue !== undefined) return '::bigint';
  if (f.doubleValue !== undefined) return '::double precision';
  if (f.blobValue !== undefined) return '::bytea';
  return f.stringValue !== undefined ? '::varchar' : '';
}

function fieldValue(f: Field): unknown {
  if (f.isNull) return null;
  if (f.booleanValue !== undefined) return f.booleanValue;
  if (f.longValue !== undefined) return f.longValue;
  if (f.doubleValue !== undefined) return f.doubleValue;
  if (f.blobValue !== undefined) return Buffer.from(f.blobValue, 'base64');
  return f.stringValue ?? null;
}

/** A value as the Data API returns it (raw text from PostgreSQL, typed by column). */
function toField(value: unknown, typeName: string): Field {
  if (value === null || value === undefined) return { isNull: true };
  const text = String(value);
  switch (typeName) {
    case 'bool':
      return { booleanValue: text === 't' || text === 'true' };
    case 'int2':
    case 'int4':
    case 'int8':
      return { longValue: Number(text) };
    case 'float4':
    case 'float8':
      return { doubleValue: Number(text) };
    case 'timestamptz':
    case 'timestamp':
      // the service returns "YYYY-MM-DD HH:MM:SS[.FFF]" (the session runs in UTC)
      return { stringValue: text.replace(/\+00(:00)?$/, '') };
    default:
      return { stringValue: text };
  }
}

const raw = { getTypeParser: () => (v: string) => v };

interface OpenTransaction {
  client: pg.PoolClient;
  begunAt: number;
  /** Calls running on it now: the idle expiry counts only while none does. */
  busy: number;
  timer: NodeJS.Timeout | undefined;
}

export async function startDataApiServer(options: DataApiServerOptions): Promise<DataApiServer> {
  const idleTimeoutMs =
    options.transactionIdleTimeoutMs ?? DATA_API_LIMITS.transactionIdleTimeoutMs;
  const maxRequestBytes = options.maxRequestBytes ?? DATA_API_LIMITS.maxRequestBytes;
  const pools = new Map<string, pg.Pool>();
  const defaultDatabase = decodeURIComponent(new URL(options.databaseUrl).pathname.slice(1));
  /** The URL a call naming `database` is served on (none: `databaseUrl`'s). */
  const databaseUrlOf = (database: unknown): string => {
    if (typeof database !== 'string' || database === '') return options.databaseUrl;
    const mapped = options.databases && Object.hasOwn(options.databases, database);
    if (mapped) return options.databases?.[database] as string;
    if (database === defaultDatabase) return options.databaseUrl;
    const url = new URL(options.databaseUrl);
    url.pathname = `/${encodeURIComponent(database)}`;
    return url.toString();
  };
  /** One pool per database and user (no login: the user of the database's URL). */
  const poolFor = (databaseUrl: string, login?: { username: string; password: string }) =>
    getOrSet(pools, `${databaseUrl}\n${login ? login.username : ''}`, () => {
      const url = new URL(databaseUrl);
      if (login) {
        url.username = encodeURIComponent(login.username);
        url.password = encodeURIComponent(login.password);
      }
      const pool = new pg.Pool({
        connectionString: url.toString(),
        // a call waits for one of 20 connections per user. The service has no such limit of its
        // own (the cluster's `max_connections`, hundreds by capacity, is the bound); a small one
        // stalls every caller once a few transactions are abandoned
        max: 20,
        types: raw,
        options: '-c TimeZone=UTC',
      });
      pool.on('error', () => {});
      return pool;
    });
  /**
   * The pool of the call's database (`database`) and user (the secret it names, when logins are
   * read from secrets).
   */
  const callPool = async (body: Record<string, unknown>) => {
    const databaseUrl = databaseUrlOf(body.database);
    if (!options.loginFor) return poolFor(databaseUrl);
    let login: { username: string; password: string };
    try {
      login = await options.loginFor(String(body.secretArn ?? ''));
    } catch (err) {
      throw Object.assign(
        new Error(`secret ${String(body.secretArn)}: ${(err as Error).message}`),
        {
          badRequest: true,
        },
      );
    }
    return poolFor(databaseUrl, login);
  };
  const transactions = new Map<string, OpenTransaction>();
  let resuming = false;
  const listening = new WeakSet<pg.PoolClient>();

  // --- the emulated auto-pause: idle (no call running, no transaction open) → paused → resuming
  let autoPause: Required<AutoPauseOptions> | undefined;
  const stats: PauseStats = { state: 'active', pauses: 0, resumes: 0, refused: 0 };
  let running = 0;
  let idleSince = Date.now();
  let pauseTimer: NodeJS.Timeout | undefined;
  let resumeTimer: NodeJS.Timeout | undefined;
  const pauseNow = () => {
    clearTimeout(pauseTimer);
    pauseTimer = undefined;
    if (stats.state !== 'active') return false;
    stats.state = 'paused';
    stats.pauses++;
    return true;
  };
  /** (Re)arms the pause of an idle cluster: `secondsUntilAutoPause` after its last activity. */
  const armPause = () => {
    clearTimeout(pauseTimer);
    pauseTimer = undefined;
    if (!autoPause || stats.state !== 'active' || running > 0 || transactions.size > 0) return;
    const left = idleSince + autoPause.secondsUntilAutoPause * 1000 - Date.now();
    pauseTimer = setTimeout(pauseNow, Math.max(0, left));
    pauseTimer.unref();
  };
  /** Whether a call is refused because the cluster is paused (it starts the resume) or resuming. */
  const refusedByPause = (body: Record<string, unknown>) => {
    if (!autoPause || stats.state === 'active') return false;
    // a transaction open before a forced pause still has its connection
    if (typeof body.transactionId === 'string' && transactions.has(body.transactionId)) {
      return false;
    }
    if (stats.state === 'paused') {
      stats.state = 'resuming';
      stats.resumes++;
      resumeFor(autoPause.resumeMs);
    }
    return true;
  };
  /** The resume under way ends `ms` from now. */
  const resumeFor = (ms: number) => {
    clearTimeout(resumeTimer);
    resumeTimer = setTimeout(() => {
      resumeTimer = undefined;
      stats.state = 'active';
      idleSince = Date.now();
      armPause();
    }, ms);
    resumeTimer.unref();
  };

  /** Forgets a transaction and gives its connection back (`broken`: destroyed instead). */
  const drop = (id: string, tx: OpenTransaction, broken?: Error) => {
    transactions.delete(id);
    clearTimeout(tx.timer);
    tx.client.release(broken);
    if (running === 0) idleSince = Date.now();
    armPause();
  };

  /** Ends a transaction (COMMIT or ROLLBACK) and gives its connection back; a broken one is destroyed. */
  const finish = async (id: string, sql: 'COMMIT' | 'ROLLBACK') => {
    const tx = transactions.get(id);
    if (!tx) return false;
    transactions.delete(id);
    clearTimeout(tx.timer);
    const broken = await tx.client.query(sql).then(
      () => undefined,
      (err: Error) => err,
    );
    drop(id, tx, broken);
    if (broken && sql === 'COMMIT') throw broken;
    return true;
  };

  /** (Re)arms the expiry of an idle transaction: the idle timeout, capped by its lifetime. */
  const arm = (id: string, tx: OpenTransaction) => {
    clearTimeout(tx.timer);
    if (tx.busy > 0) return;
    const end = tx.begunAt + DATA_API_LIMITS.transactionMaxLifetimeMs;
    const left = Math.min(idleTimeoutMs, end - Date.now());
    tx.timer = setTimeout(() => void finish(id, 'ROLLBACK').catch(() => {}), Math.max(0, left));
    tx.timer.unref();
  };

  const fail = (res: ServerResponse, status: number, type: string, message: string) => {
    res.writeHead(status, { 'content-type': 'application/json', 'x-amzn-errortype': type });
    res.end(JSON.stringify({ message }));
  };

  const handle = async (path: string, body: Record<string, unknown>, res: ServerResponse) => {
    if (path === '/BeginTransaction') {
      const client = await (await callPool(body)).connect();
      // A connection the database terminated (idle_in_transaction_session_timeout, a killed
      // backend) ends its transaction at once, and its connection goes back: an abandoned
      // transaction (its caller killed) must not hold one of the pool's connections until the
      // 3-minute expiry, or enough of them stall every call of that user.
      if (!listening.has(client)) {
        listening.add(client);
        client.on('error', (err) => {
          for (const [id, open] of transactions) {
            if (open.client === client && open.busy === 0) drop(id, open, err);
          }
        });
      }
      try {
        await client.query('BEGIN');
      } catch (err) {
        client.release(err as Error);
        throw err;
      }
      if (res.destroyed || res.writableEnded || res.socket?.destroyed) {
        // the caller is gone before it learnt the id (killed, timed out): the service would keep
        // the transaction until its expiry; it holds no lock, only a connection, so it goes now
        await client.query('ROLLBACK').catch(() => {});
        client.release();
        return undefined;
      }
      const id = randomUUID();
      const tx: OpenTransaction = { client, begunAt: Date.now(), busy: 0, timer: undefined };
      transactions.set(id, tx);
      arm(id, tx);
      return { transactionId: id };
    }
    if (path === '/CommitTransaction' || path === '/RollbackTransaction') {
      const id = String(body.transactionId);
      const commit = path === '/CommitTransaction';
      if (!(await finish(id, commit ? 'COMMIT' : 'ROLLBACK')))
        return fail(res, 404, 'NotFoundException', `Transaction ${id} isn't found`);
      return { transactionStatus: commit ? 'Transaction Committed' : 'Rollback Complete' };
    }
    if (path === '/Execute') {
      const id = body.transactionId as string | undefined;
      const tx = id ? transactions.get(id) : undefined;
      if (id && !tx)
        return fail(res, 400, 'TransactionNotFoundException', `Transaction ${id} isn't found`);
      const { text, values } = toPositional(
        String(body.sql),
        (body.parameters as SqlParameter[]) ?? [],
      );
      let result: pg.QueryResult | pg.QueryResult[];
      if (tx && id) {
        tx.busy++;
        clearTimeout(tx.timer);
        try {
          result = await tx.client.query({ text, values, types: raw });
        } catch (err) {
          // the database ended the session (e.g. idle_in_transaction_session_timeout): so is the transaction
          const code = (err as { code?: string }).code;
          if (!code || /^(08|57P)/.test(code)) drop(id, tx, err as Error);
          throw err;
        } finally {
          tx.busy--;
          if (transactions.get(id) === tx) arm(id, tx);
        }
      } else {
        result = await (await callPool(body)).query({ text, values, types: raw });
      }
      if (Array.isArray(result)) {
        return fail(
          res,
          400,
          'DatabaseErrorException',
          'ERROR: multiple statements in one call are not supported; SQLState: 42601',
        );
      }
      const fields = result.fields ?? [];
      const types = fields.map((f) => TYPE_NAMES[f.dataTypeID] ?? 'unknown');
      const out = {
        numberOfRecordsUpdated: result.command === 'SELECT' ? 0 : (result.rowCount ?? 0),
        ...(fields.length > 0
          ? {
              records: result.rows.map((row) =>
                fields.map((f, i) =>
                  toField((row as Record<string, unknown>)[f.name], types[i] as string),
                ),
              ),
            }
          : {}),
        ...(body.includeResultMetadata
          ? {
              columnMetadata: fields.map((f, i) => ({
                name: f.name,
                label: f.name,
                typeName: types[i],
              })),
            }
          : {}),
      };
      // a larger response (its JSON) fails the call (the service: 1 MiB)
      if (Buffer.byteLength(JSON.stringify(out)) > DATA_API_LIMITS.maxResponseBytes) {
        if (tx && id) await finish(id, 'ROLLBACK').catch(() => {});
        return fail(
          res,
          400,
          'BadRequestException',
          'Database returned more than the allowed response size limit',
        );
      }
      return out;
    }
    return fail(res, 404, 'UnknownOperationException', `unknown operation ${path}`);
  };

  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    // the SDK sends `application/json` (REST-JSON); anything else is not a Data API call
    const type = String(req.headers['content-type'] ?? '')
      .split(';')[0]
      ?.trim()
      .toLowerCase();
    if (type !== 'application/json') {
      res.setHeader('connection', 'close');
      return fail(
        res,
        415,
        'UnsupportedMediaTypeException',
        'Content-Type must be application/json',
      );
    }
    const bytes = await readBody(req, maxRequestBytes);
    if (bytes === 'too-large') {
      res.setHeader('connection', 'close');
      fail(res, 413, 'BadRequestException', `request larger than ${maxRequestBytes} bytes`);
      req.destroy();
      return;
    }
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(bytes.toString('utf8') || '{}');
    } catch {
      return fail(res, 400, 'BadRequestException', 'malformed request body');
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      return fail(res, 400, 'BadRequestException', 'the request body must be a JSON object');
    }
    if (resuming || refusedByPause(body)) {
      stats.refused++;
      return fail(
        res,
        400,
        'DatabaseResumingException',
        'The Aurora DB instance is resuming after being auto-paused. Please wait a few seconds and try again.',
      );
    }
    running++;
    clearTimeout(pauseTimer);
    try {
      const out = await handle(new URL(req.url ?? '/', 'http://local').pathname, body, res);
      if (out && !res.headersSent) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(out));
      }
    } catch (err) {
      const e = err as { message?: string; code?: string; sqlState?: string; badRequest?: boolean };
      if (e.badRequest) return fail(res, 400, 'BadRequestException', e.message ?? 'bad request');
      const state = e.code && /^[0-9A-Z]{5}$/.test(e.code) ? e.code : e.sqlState;
      if (state)
        return fail(res, 400, 'DatabaseErrorException', `ERROR: ${e.message}; SQLState: ${state}`);
      return fail(res, 503, 'DatabaseUnavailableException', e.message ?? 'database unavailable');
    } finally {
      running--;
      idleSince = Date.now();
      armPause();
    }
  });
  if (options.autoPause) autoPause = validAutoPause(options.autoPause);
  const address = await listen(server);
  armPause();
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    address,
    setResuming(on: boolean) {
      resuming = on;
    },
    setAutoPause(o: AutoPauseOptions | undefined) {
      autoPause = o ? validAutoPause(o) : undefined;
      if (!autoPause) {
        clearTimeout(resumeTimer);
        resumeTimer = undefined;
        stats.state = 'active';
      } else if (stats.state === 'resuming') {
        // a resume under way ends after the new resume time, counted from now
        resumeFor(autoPause.resumeMs);
      }
      armPause();
    },
    pause: () => Boolean(autoPause) && pauseNow(),
    pauseStats: () => ({ ...stats }),
    openTransactions: () => transactions.size,
    async close() {
      autoPause = undefined;
      clearTimeout(pauseTimer);
      clearTimeout(resumeTimer);
      for (const id of [...transactions.keys()]) await finish(id, 'ROLLBACK').catch(() => {});
      await closeServer(server);
      await Promise.all([...pools.values()].map((p) => p.end()));
    },
  };
}
