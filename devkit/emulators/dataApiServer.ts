import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { mapOutsideQuotes } from '../../shared/db/statements.js';

/**
 * A local endpoint that speaks the RDS Data API's wire protocol (REST-JSON: POST /Execute,
 * /BeginTransaction, /CommitTransaction, /RollbackTransaction) over a real PostgreSQL, so the real
 * `@aws-sdk/client-rds-data` can be tested here: no emulator runs SQL (moto returns canned results).
 *
 * What it reproduces of the service (docs/aws-facts.md, RDS Data API): named parameters (`:name`) with `typeHint`
 * (UUID, TIMESTAMP, JSON, DECIMAL, DATE, TIME), typed fields in `records` with `columnMetadata`,
 * `numberOfRecordsUpdated`, transactions by id, SQL errors as `DatabaseErrorException` with the
 * SQLSTATE in the message, `TransactionNotFoundException`, one statement per call. Not reproduced:
 * size limits, the 3-minute idle transaction expiry, auto-pause.
 */
export interface DataApiServer {
  endpoint: string;
  close(): Promise<void>;
}

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
      return `$${n}${p.typeHint ? (CASTS[p.typeHint] ?? '') : ''}`;
    }),
  );
  return { text, values };
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

export async function startDataApiServer(options: {
  databaseUrl: string;
  port?: number;
}): Promise<DataApiServer> {
  const pool = new pg.Pool({
    connectionString: options.databaseUrl,
    max: 8,
    types: raw,
    options: '-c TimeZone=UTC',
  });
  pool.on('error', () => {});
  const transactions = new Map<string, pg.PoolClient>();

  const fail = (res: ServerResponse, status: number, type: string, message: string) => {
    res.writeHead(status, { 'content-type': 'application/json', 'x-amzn-errortype': type });
    res.end(JSON.stringify({ message }));
  };

  const handle = async (path: string, body: Record<string, unknown>, res: ServerResponse) => {
    if (path === '/BeginTransaction') {
      const client = await pool.connect();
      await client.query('BEGIN');
      const id = randomUUID();
      transactions.set(id, client);
      return { transactionId: id };
    }
    if (path === '/CommitTransaction' || path === '/RollbackTransaction') {
      const id = String(body.transactionId);
      const client = transactions.get(id);
      if (!client) return fail(res, 404, 'NotFoundException', `Transaction ${id} isn't found`);
      transactions.delete(id);
      try {
        await client.query(path === '/CommitTransaction' ? 'COMMIT' : 'ROLLBACK');
      } finally {
        client.release();
      }
      return {
        transactionStatus:
          path === '/CommitTransaction' ? 'Transaction Committed' : 'Rollback Complete',
      };
    }
    if (path === '/Execute') {
      const id = body.transactionId as string | undefined;
      const client = id ? transactions.get(id) : undefined;
      if (id && !client)
        return fail(res, 400, 'TransactionNotFoundException', `Transaction ${id} isn't found`);
      const { text, values } = toPositional(
        String(body.sql),
        (body.parameters as SqlParameter[]) ?? [],
      );
      const result = await (client ?? pool).query({ text, values, types: raw });
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
      return {
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
    }
    return fail(res, 404, 'UnknownOperationException', `unknown operation ${path}`);
  };

  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
    } catch {
      return fail(res, 400, 'BadRequestException', 'malformed request body');
    }
    try {
      const out = await handle(new URL(req.url ?? '/', 'http://local').pathname, body, res);
      if (out && !res.headersSent) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(out));
      }
    } catch (err) {
      const e = err as { message?: string; code?: string; sqlState?: string };
      const state = e.code && /^[0-9A-Z]{5}$/.test(e.code) ? e.code : e.sqlState;
      if (state)
        return fail(res, 400, 'DatabaseErrorException', `ERROR: ${e.message}; SQLState: ${state}`);
      return fail(res, 503, 'DatabaseUnavailableException', e.message ?? 'database unavailable');
    }
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    async close() {
      for (const c of transactions.values()) {
        await c.query('ROLLBACK').catch(() => {});
        c.release();
      }
      transactions.clear();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await pool.end();
    },
  };
}
