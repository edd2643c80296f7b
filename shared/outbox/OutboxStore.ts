import { sqlIdentifier } from '../db/identifier.js';
import type { SqlExecutor, SqlParam } from '../db/types.js';
import { type Envelope, encodeEnvelope, parseEnvelope } from '../envelope/envelope.js';

/**
 * Storage rules of both outboxes (`outbox`, `inventory_outbox`). Every implementation MUST:
 * - write the event row in the caller's transaction (`append`), so it commits or rolls back with
 *   the business change;
 * - hand out a row to at most one relay at a time (`claim` locks with FOR UPDATE SKIP LOCKED inside
 *   the relay's transaction; the lock is the round);
 * - set `published_at` only for rows the broker confirmed (`markPublished`);
 * - keep the event id stable across every retry.
 */
export interface OutboxRow {
  envelope: Envelope;
  attempts: number;
}

/** A claimed row that can never be published as it is: taken out of the batches with its reason. */
export interface SetAsideRow {
  id: string;
  type: string;
  reason: string;
}

export interface ClaimResult {
  /** Rows to publish, oldest first. */
  rows: OutboxRow[];
  /** Rows of this claim that were set aside (needs attention) instead: they never reach the broker. */
  setAside: SetAsideRow[];
  /**
   * `occurred_at` of the oldest row this claim locked (set-aside rows included), or undefined when
   * it locked none: where the relay bounds its next claims (`ClaimOptions.occurredFrom`).
   */
  oldestOccurredAt?: Date;
  /**
   * The claim stopped at its byte bound (`ClaimOptions.maxBytes`): rows it locked behind the last
   * one returned are due, unchanged, and go to the next claim once this transaction ends.
   */
  truncated: boolean;
}

export interface ClaimOptions {
  /**
   * Only rows with `occurred_at >= occurredFrom`. The claim reads `outbox_unpublished_idx`
   * (`occurred_at`, partial on the unpublished rows) oldest first, so the bound is where the index
   * scan starts: it does not step over the entries below it, which include those of rows published
   * since the database's horizon was pinned (dead, but not removable while it is; see
   * docs/performance.md, "Pinned horizon"). Rows below the bound are not claimed: the caller must
   * claim without a bound often enough (OutboxRelay: a full claim every `fullClaimEveryMs`).
   */
  occurredFrom?: Date;
  /**
   * The claim's result in bytes (each row sized as a JSON response carries it): rows are taken
   * oldest first while their running sum stays within it, always at least one. Rows past it stay
   * locked for the transaction, unchanged (`ClaimResult.truncated`). Unset: no bound.
   */
  maxBytes?: number;
  /**
   * The largest row a result may hold (the RDS Data API: 64 KB): a larger row is claimed without
   * its payload and set aside (it could never be read), never returned. Unset: no bound.
   */
  maxRowBytes?: number;
}

/**
 * `last_error` of a row the relay set aside because it cannot be published (it fails validation or
 * is too large), as opposed to a row that ran out of publish attempts. Both need attention.
 */
export const SET_ASIDE_PREFIX = 'set aside: ';

/** `last_error` of a published row put back because a lost route may have swallowed it. */
export const REPUBLISH_PREFIX = 'republished, a route was lost: ';

/** A row that needs attention, as an operator reads it (never the payload). */
export interface NeedsAttentionRow {
  id: string;
  type: string;
  schemaVersion: string;
  occurredAt: string;
  needsAttentionAt: string;
  attempts: number;
  /** True when the relay set it aside (cannot be published), false when it ran out of attempts. */
  setAside: boolean;
  /** Why (the reason it was set aside, or the last publish error). */
  reason: string;
}

export interface PublishFailure {
  id: string;
  error: string;
  /** Delay before this row is due again. */
  retryInMs: number;
}

export interface OutboxStatus {
  table: string;
  /** Unpublished rows that the relay will still try. */
  backlog: number;
  /** Of those, rows that failed at least once. */
  retrying: number;
  /**
   * Age of the oldest unpublished row the relay still tries (seconds), or null when there is none.
   * Rows needing attention are left out: they have their own count (and alarm), and one of them
   * must not hold this figure up for ever and hide a relay that stalls later.
   */
  oldestUnpublishedAgeSeconds: number | null;
  /**
   * Rows out of the batches until an operator acts: those that reached the attempt limit and those
   * set aside because they cannot be published.
   */
  needsAttention: number;
  /** Of those, rows set aside because they cannot be published (see `SET_ASIDE_PREFIX`). */
  setAside: number;
  published: number;
}

interface OutboxDbRow {
  id: string;
  event_type: string;
  schema_version: string;
  aggregate_type: string;
  aggregate_id: string;
  aggregate_version: number;
  payload: Record<string, unknown>;
  producer: string;
  correlation_id: string;
  causation_id: string | null;
  trace_id: string | null;
  occurred_at: Date | string;
  attempts: number;
  /** With a byte bound: the row's size in a result (`ROW_BYTES_SQL`), whether it is too large to
   * return, whether a locked row follows it. */
  row_bytes?: number | string;
  too_large?: boolean | null;
  more?: boolean | null;
}

/** The columns a claim returns (both forms of it). */
const CLAIMED = [
  'id',
  'event_type',
  'schema_version',
  'aggregate_type',
  'aggregate_id',
  'aggregate_version',
  'payload',
  'producer',
  'correlation_id',
  'causation_id',
  'trace_id',
  'occurred_at',
  'attempts',
] as const;
const COLUMNS = CLAIMED.join(', ');
/** What a sized claim leaves out of a row too large to return (it keeps the row's identity). */
const NULLED_WHEN_TOO_LARGE = CLAIMED.filter(
  (c) => !['id', 'event_type', 'occurred_at', 'attempts'].includes(c),
);

/**
 * Per row of a claim's result, what its fields cost beyond the text of its values: a Data API
 * record wraps every field (`{"stringValue":…}`, `{"longValue":…}`, `{"isNull":true}`), and the
 * numbers, the timestamp and the claim's own columns add some 150 bytes. Generous on purpose.
 */
export const CLAIM_ROW_FRAMING_BYTES = 400;

/**
 * A claimed row's size in a result, in SQL: the payload's JSON text and the other text values, each
 * as a JSON string (quotes and escapes included, `to_json`; the other values joined, one call), plus
 * the fields' framing. What the Data API sends is JSON; PostgreSQL's escaping is JSON's.
 */
const ROW_BYTES_SQL = `(${CLAIM_ROW_FRAMING_BYTES} + octet_length(to_json(payload::text)::text)
      + octet_length(to_json(concat(id, event_type, schema_version, aggregate_type, aggregate_id, producer,
                                    correlation_id, causation_id, trace_id))::text))`;

/** A row left out of a result (too large) still costs its id, type and framing. */
const LEFT_OUT_ROW_BYTES = 1_000;

/** A byte bound as SQL text: a positive safe integer, or a clear error. */
function byteBound(name: string, value: number): string {
  if (!Number.isSafeInteger(value) || value <= 0)
    throw new RangeError(`${name}: ${value} is not a positive number of bytes`);
  return String(value);
}

function toIso(value: Date | string): string {
  return value instanceof Date ? value.toISOString() : new Date(value).toISOString();
}

/** The envelope of a row, or why it cannot be published (never quoting the payload). */
function unpublishable(r: OutboxDbRow, maxMessageBytes: number | undefined): Envelope | string {
  let envelope: Envelope;
  try {
    envelope = parseEnvelope({
      id: r.id,
      type: r.event_type,
      schema_version: r.schema_version,
      occurred_at: toIso(r.occurred_at),
      producer: r.producer,
      correlation_id: r.correlation_id,
      causation_id: r.causation_id,
      ...(r.trace_id ? { trace_id: r.trace_id } : {}),
      aggregate: { type: r.aggregate_type, id: r.aggregate_id, version: r.aggregate_version },
      data: r.payload,
    });
  } catch (err) {
    return `invalid envelope: ${(err as Error).message}`;
  }
  if (maxMessageBytes !== undefined) {
    const bytes = encodeEnvelope(envelope).length;
    if (bytes > maxMessageBytes) {
      return `too large: the message is ${bytes} bytes, the limit is ${maxMessageBytes}`;
    }
  }
  return envelope;
}

export class OutboxStore {
  /** `table`: the outbox table (the library's migrations create it), a plain SQL identifier. */
  readonly table: string;

  constructor(table: string) {
    this.table = sqlIdentifier(table, 'outbox table');
  }

  /** Writes one event in the caller's transaction. */
  async append(tx: SqlExecutor, envelope: Envelope): Promise<void> {
    await tx.query(this.appendSql(1), OutboxStore.appendParams(envelope));
  }

  /**
   * The INSERT of `append`, reading its 12 values from parameters `$first`… (see `appendParams`),
   * for use as the last part of a larger statement: with `from`, one row is written per row of
   * that relation (a CTE), so "insert the event only if the order was inserted" is one statement.
   */
  appendSql(first: number, from?: string): string {
    const p = (i: number, type: string) => `$${first + i}::${type}`;
    return `INSERT INTO ${this.table} (id, event_type, schema_version, aggregate_type, aggregate_id,
         aggregate_version, payload, producer, correlation_id, causation_id, occurred_at, trace_id)
       SELECT ${p(0, 'uuid')}, ${p(1, 'text')}, ${p(2, 'text')}, ${p(3, 'text')}, ${p(4, 'text')},
              ${p(5, 'integer')}, ${p(6, 'jsonb')}, ${p(7, 'text')}, ${p(8, 'text')}, ${p(9, 'text')},
              ${p(10, 'timestamptz')}, ${p(11, 'text')}${from ? ` FROM ${from}` : ''}`;
  }

  /** The values `appendSql` reads, in order. */
  static appendParams(envelope: Envelope): SqlParam[] {
    return [
      envelope.id,
      envelope.type,
      envelope.schema_version,
      envelope.aggregate.type,
      envelope.aggregate.id,
      envelope.aggregate.version,
      JSON.stringify(envelope.data),
      envelope.producer,
      envelope.correlation_id,
      envelope.causation_id,
      envelope.occurred_at,
      envelope.trace_id ?? null,
    ];
  }

  /**
   * Writes several events in the caller's transaction with one statement. An event whose id is
   * already there is skipped (ids derived from another message make the write idempotent).
   */
  async appendMany(tx: SqlExecutor, envelopes: readonly Envelope[]): Promise<void> {
    if (envelopes.length === 0) return;
    await tx.query(this.insertManySql(1), [OutboxStore.recordset(envelopes)]);
  }

  /**
   * The INSERT of `appendMany`, reading its rows from parameter `$n` (see `recordset`), for use
   * inside a larger statement (as a CTE). Existing ids are skipped.
   */
  insertManySql(n: number): string {
    return `INSERT INTO ${this.table} (id, event_type, schema_version, aggregate_type, aggregate_id,
         aggregate_version, payload, producer, correlation_id, causation_id, occurred_at, trace_id)
       SELECT e.id, e.type, e.schema_version, e.aggregate_type, e.aggregate_id, e.aggregate_version,
              e.data, e.producer, e.correlation_id, e.causation_id, e.occurred_at, e.trace_id
         FROM jsonb_to_recordset($${n}::jsonb) AS e(id uuid, type text, schema_version text,
              aggregate_type text, aggregate_id text, aggregate_version integer, data jsonb,
              producer text, correlation_id text, causation_id text, occurred_at timestamptz,
              trace_id text)
       ON CONFLICT (id) DO NOTHING`;
  }

  /** The JSON parameter `insertManySql` reads. */
  static recordset(envelopes: readonly Envelope[]): string {
    return JSON.stringify(
      envelopes.map((e) => ({
        id: e.id,
        type: e.type,
        schema_version: e.schema_version,
        aggregate_type: e.aggregate.type,
        aggregate_id: e.aggregate.id,
        aggregate_version: e.aggregate.version,
        data: e.data,
        producer: e.producer,
        correlation_id: e.correlation_id,
        causation_id: e.causation_id,
        occurred_at: e.occurred_at,
        trace_id: e.trace_id ?? null,
      })),
    );
  }

  /**
   * Locks up to `limit` due rows, oldest first, skipping rows another relay holds. Must run inside
   * a transaction; the locks last until it ends. The rows it sets aside (see `claimBatch`) are
   * left out.
   */
  async claim(
    tx: SqlExecutor,
    limit: number,
    options: { maxMessageBytes?: number } & ClaimOptions = {},
  ): Promise<OutboxRow[]> {
    return (await this.claimBatch(tx, limit, options)).rows;
  }

  /**
   * Whether a claim would find a row: one statement, outside any transaction, taking no lock.
   * An empty outbox's round costs this alone (docs/performance.md, "Cost per million orders").
   * With `occurredFrom`, whether a claim with that bound would (see `ClaimOptions`).
   */
  async hasClaimable(db: SqlExecutor, options: ClaimOptions = {}): Promise<boolean> {
    const from = options.occurredFrom;
    const { rows } = await db.query<{ found: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM ${this.table}
         WHERE published_at IS NULL AND needs_attention_at IS NULL AND next_attempt_at <= now()${from ? ' AND occurred_at >= $1::timestamptz' : ''}) AS found`,
      from ? [from.toISOString()] : undefined,
    );
    return rows[0]?.found === true;
  }

  /**
   * `claim`, reporting the rows it set aside. Rows were validated when written, but a row can still
   * be unpublishable: a newer schema major written during a mixed deploy, a hand-edited row (bad
   * type, `payload` not an object), an encoded message over `maxMessageBytes`. Such a row would
   * fail every round at the head of the queue, so it is marked as needing attention, in this
   * transaction, with its reason in `last_error` (`set aside: …`), and every other row of the
   * claim goes on. `outbox retry` puts it back once it was fixed.
   */
  async claimBatch(
    tx: SqlExecutor,
    limit: number,
    options: { maxMessageBytes?: number } & ClaimOptions = {},
  ): Promise<ClaimResult> {
    const from = options.occurredFrom;
    const sized = options.maxBytes !== undefined || options.maxRowBytes !== undefined;
    const { rows } = await tx.query<OutboxDbRow>(
      sized ? this.sizedClaimSql(from !== undefined, options) : this.claimSql(from !== undefined),
      from ? [limit, from.toISOString()] : [limit],
    );
    const good: OutboxRow[] = [];
    const setAside: SetAsideRow[] = [];
    for (const r of rows) {
      const reason =
        r.too_large === true
          ? `too large: the row takes ${Number(r.row_bytes)} bytes of a result, the database returns at most ${options.maxRowBytes} per row`
          : unpublishable(r, options.maxMessageBytes);
      if (typeof reason === 'string') setAside.push({ id: r.id, type: r.event_type, reason });
      else good.push({ attempts: r.attempts, envelope: reason });
    }
    if (setAside.length > 0) {
      await tx.query(
        `UPDATE ${this.table} AS o
            SET needs_attention_at = now(), last_error = left($2::text || s.reason, 1000)
           FROM jsonb_to_recordset($1::jsonb) AS s(id uuid, reason text)
          WHERE o.id = s.id AND o.published_at IS NULL`,
        [JSON.stringify(setAside.map((s) => ({ id: s.id, reason: s.reason }))), SET_ASIDE_PREFIX],
      );
    }
    // oldest first: the first row locked is the oldest (a sized claim always returns it); the last
    // row returned says whether a locked row was left behind it
    const first = rows[0];
    return {
      rows: good,
      setAside,
      truncated: rows[rows.length - 1]?.more === true,
      ...(first ? { oldestOccurredAt: new Date(toIso(first.occurred_at)) } : {}),
    };
  }

  /** The claim: due rows, oldest first, skipping rows another relay holds. */
  private claimSql(bounded: boolean): string {
    return `SELECT ${COLUMNS} FROM ${this.table}
        WHERE published_at IS NULL AND needs_attention_at IS NULL AND next_attempt_at <= now()${bounded ? ' AND occurred_at >= $2::timestamptz' : ''}
        ORDER BY occurred_at
        LIMIT $1
        FOR UPDATE SKIP LOCKED`;
  }

  /**
   * The claim bounded by bytes: the same rows locked (`claimSql`, as a subquery), each sized as a
   * result carries it (`ROW_BYTES_SQL`); returned oldest first while the running sum stays within
   * `maxBytes`, always the first. A row over `maxRowBytes` comes back without its values
   * (`too_large`, to be set aside) and counts `LEFT_OUT_ROW_BYTES`. `more`: a locked row follows.
   * The bounds are numbers of the code, written into the statement; its parameters stay those of
   * `claimSql`. One window over the locked rows, no second pass.
   */
  private sizedClaimSql(bounded: boolean, options: ClaimOptions): string {
    const maxRow =
      options.maxRowBytes === undefined ? undefined : byteBound('maxRowBytes', options.maxRowBytes);
    const maxBytes =
      options.maxBytes === undefined ? undefined : byteBound('maxBytes', options.maxBytes);
    const tooLarge = maxRow === undefined ? 'false' : `c.row_bytes > ${maxRow}`;
    const keep = (column: string) => `CASE WHEN s.too_large THEN NULL ELSE s.${column} END`;
    return `SELECT s.id, CASE WHEN s.too_large THEN left(s.event_type, 200) ELSE s.event_type END AS event_type, ${NULLED_WHEN_TOO_LARGE.map(
      (c) => `${keep(c)} AS ${c}`,
    ).join(', ')},
           s.occurred_at, s.attempts, s.row_bytes, s.too_large, s.more
      FROM (
        SELECT c.*, ${tooLarge} AS too_large, row_number() OVER w AS n,
               sum(CASE WHEN ${tooLarge} THEN ${LEFT_OUT_ROW_BYTES} ELSE c.row_bytes END) OVER w AS running,
               lead(c.id) OVER w IS NOT NULL AS more
          FROM (
            SELECT ${COLUMNS}, ${ROW_BYTES_SQL} AS row_bytes FROM ${this.table}
             WHERE published_at IS NULL AND needs_attention_at IS NULL AND next_attempt_at <= now()${bounded ? ' AND occurred_at >= $2::timestamptz' : ''}
             ORDER BY occurred_at
             LIMIT $1
             FOR UPDATE SKIP LOCKED
          ) AS c
        WINDOW w AS (ORDER BY c.occurred_at ROWS UNBOUNDED PRECEDING)
      ) AS s
     WHERE s.n = 1${maxBytes === undefined ? '' : ` OR s.running <= ${maxBytes}`}
     ORDER BY s.n`;
  }

  /**
   * Marks confirmed rows. `published_at` is the time of this statement, which runs after the
   * confirms arrived: `now()` would be the start of the relay's transaction, before the publish, and
   * `published_at - occurred_at` would then hide the broker's share of the outbox lag.
   */
  async markPublished(tx: SqlExecutor, ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    const { rowCount } = await tx.query(
      `UPDATE ${this.table} SET published_at = statement_timestamp(), last_error = NULL
        WHERE id = ANY (ARRAY(SELECT jsonb_array_elements_text($1::jsonb)::uuid)) AND published_at IS NULL`,
      [JSON.stringify(ids)],
    );
    return rowCount;
  }

  /**
   * Records failed publishes: attempts + 1, the next due time, the error; a row reaching
   * `maxAttempts` needs attention and leaves the batches.
   */
  async markFailed(
    tx: SqlExecutor,
    failures: readonly PublishFailure[],
    maxAttempts: number,
  ): Promise<{ needsAttention: number }> {
    if (failures.length === 0) return { needsAttention: 0 };
    const { rows } = await tx.query<{ needs_attention: boolean }>(
      `UPDATE ${this.table} AS o
          SET attempts = o.attempts + 1,
              next_attempt_at = now() + make_interval(secs => f.retry_in_ms / 1000.0),
              last_error = left(f.error, 1000),
              needs_attention_at = CASE WHEN o.attempts + 1 >= $2 THEN now() END
         FROM jsonb_to_recordset($1::jsonb) AS f(id uuid, error text, retry_in_ms integer)
        WHERE o.id = f.id
          AND o.id = ANY (ARRAY(SELECT (x ->> 'id')::uuid FROM jsonb_array_elements($1::jsonb) AS x))
          AND o.published_at IS NULL
        RETURNING o.needs_attention_at IS NOT NULL AS needs_attention`,
      [
        JSON.stringify(
          failures.map((f) => ({ id: f.id, error: f.error, retry_in_ms: f.retryInMs })),
        ),
        maxAttempts,
      ],
    );
    return { needsAttention: rows.filter((r) => r.needs_attention).length };
  }

  /**
   * Puts published rows back into the batches: those marked within [from, to] whose event type
   * `eventTypes` accepts (a lost route may have swallowed them, docs/design.md §4). They are due at
   * once, with every attempt again and `last_error` saying why; the consumers' inbox absorbs the
   * copies of those that had arrived. Two statements on `outbox_published_at_idx` (the event types
   * marked in the window, then the UPDATE of the matching ones); a row marked in between is left
   * to the next loss the route check records. Returns the rows put back.
   */
  async republish(
    db: SqlExecutor,
    loss: { from: Date; to: Date; eventTypes: (eventType: string) => boolean; reason: string },
  ): Promise<number> {
    const window = [loss.from.toISOString(), loss.to.toISOString()];
    const { rows } = await db.query<{ event_type: string }>(
      `SELECT DISTINCT event_type FROM ${this.table}
        WHERE published_at IS NOT NULL AND published_at >= $1::timestamptz AND published_at <= $2::timestamptz`,
      window,
    );
    const types = rows.map((r) => r.event_type).filter((t) => loss.eventTypes(t));
    if (types.length === 0) return 0;
    const { rowCount } = await db.query(
      `UPDATE ${this.table}
          SET published_at = NULL, attempts = 0, next_attempt_at = now(), last_error = left($4::text, 1000)
        WHERE published_at IS NOT NULL AND published_at >= $1::timestamptz AND published_at <= $2::timestamptz
          AND event_type = ANY (ARRAY(SELECT jsonb_array_elements_text($3::jsonb)))`,
      [...window, JSON.stringify(types), `${REPUBLISH_PREFIX}${loss.reason}`],
    );
    return rowCount;
  }

  /** Puts rows that need attention back into the batches (after the cause was fixed). */
  async retryNeedsAttention(db: SqlExecutor, ids?: readonly string[]): Promise<number> {
    const { rowCount } = await db.query(
      `UPDATE ${this.table} SET needs_attention_at = NULL, attempts = 0, next_attempt_at = now()
        WHERE needs_attention_at IS NOT NULL AND published_at IS NULL
          AND ($1::jsonb IS NULL OR id = ANY (ARRAY(SELECT jsonb_array_elements_text($1::jsonb)::uuid)))`,
      [ids ? JSON.stringify(ids) : null],
    );
    return rowCount;
  }

  /**
   * Backlog figures. `includePublished` adds a count of published rows, which scans the table:
   * fine for an operator's command, not for metrics published every minute.
   */
  async status(
    db: SqlExecutor,
    options: { includePublished?: boolean } = {},
  ): Promise<OutboxStatus> {
    const { rows } = await db.query<{
      backlog: string;
      retrying: string;
      oldest_age: number | null;
      needs_attention: string;
      set_aside: string;
      published: string;
    }>(
      `SELECT
         count(*) FILTER (WHERE published_at IS NULL AND needs_attention_at IS NULL) AS backlog,
         count(*) FILTER (WHERE published_at IS NULL AND needs_attention_at IS NULL AND attempts > 0) AS retrying,
         extract(epoch FROM now() - min(occurred_at)
           FILTER (WHERE published_at IS NULL AND needs_attention_at IS NULL))::float8 AS oldest_age,
         count(*) FILTER (WHERE needs_attention_at IS NOT NULL AND published_at IS NULL) AS needs_attention,
         count(*) FILTER (WHERE needs_attention_at IS NOT NULL AND published_at IS NULL
                            AND starts_with(last_error, $1::text)) AS set_aside,
         ${options.includePublished === false ? '0' : 'count(*) FILTER (WHERE published_at IS NOT NULL)'} AS published
       FROM ${this.table}
       ${options.includePublished === false ? 'WHERE published_at IS NULL' : ''}`,
      [SET_ASIDE_PREFIX],
    );
    const r = rows[0];
    return {
      table: this.table,
      backlog: Number(r?.backlog ?? 0),
      retrying: Number(r?.retrying ?? 0),
      oldestUnpublishedAgeSeconds:
        r?.oldest_age == null ? null : Math.round(r.oldest_age * 10) / 10,
      needsAttention: Number(r?.needs_attention ?? 0),
      setAside: Number(r?.set_aside ?? 0),
      published: Number(r?.published ?? 0),
    };
  }

  /** Rows that need attention, in the order they came to need it, with their reason (at most `limit`). */
  async needsAttention(db: SqlExecutor, limit = 50): Promise<NeedsAttentionRow[]> {
    const { rows } = await db.query<{
      id: string;
      event_type: string;
      schema_version: string;
      occurred_at: Date | string;
      needs_attention_at: Date | string;
      attempts: number;
      last_error: string | null;
    }>(
      `SELECT id, event_type, schema_version, occurred_at, needs_attention_at, attempts, last_error
         FROM ${this.table}
        WHERE needs_attention_at IS NOT NULL AND published_at IS NULL
        ORDER BY needs_attention_at, occurred_at
        LIMIT $1`,
      [limit],
    );
    return rows.map((r) => {
      const error = r.last_error ?? '';
      const setAside = error.startsWith(SET_ASIDE_PREFIX);
      return {
        id: r.id,
        type: r.event_type,
        schemaVersion: r.schema_version,
        occurredAt: toIso(r.occurred_at),
        needsAttentionAt: toIso(r.needs_attention_at),
        attempts: r.attempts,
        setAside,
        reason: setAside ? error.slice(SET_ASIDE_PREFIX.length) : error,
      };
    });
  }
}
