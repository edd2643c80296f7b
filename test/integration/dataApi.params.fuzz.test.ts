import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toSqlParameter } from '../../shared/db/data-api/DataApiDatabase.js';
import { localDataApi } from '../helpers/dataApi.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

/**
 * The Data API adapter's parameter mapping, fuzzed through the local Data API endpoint into the
 * real PostgreSQL and back: a string parameter is never interpreted (timestamp- or UUID-looking
 * strings come back exactly as sent), and a typed statement (`$1::uuid`, `$1::timestamptz`) gets
 * its type from the statement. Runs are seeded (FUZZ_SEED overrides); FUZZ_RUNS scales them.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20_261_201);
const RUNS = Number(process.env.FUZZ_RUNS ?? 1);
const TIMEOUT = 30_000 * Math.max(1, RUNS);
const runs = (n: number) => ({ seed: SEED, numRuns: Math.max(1, Math.round(n * RUNS)) });

const hex = (n: number) =>
  fc.string({ unit: fc.constantFrom(...'0123456789abcdefABCDEF'), minLength: n, maxLength: n });
/** UUID-shaped strings in any case. */
const uuidLike = fc.tuple(hex(8), hex(4), hex(4), hex(4), hex(12)).map((parts) => parts.join('-'));
const pad = (n: number, w: number) => String(n).padStart(w, '0');
/** ISO-8601-shaped strings, valid dates or not (`2024-13-45T99:99:99Z`). */
const timestampLike = fc
  .tuple(
    fc.integer({ min: 0, max: 9999 }),
    fc.integer({ min: 0, max: 99 }),
    fc.integer({ min: 0, max: 99 }),
    fc.integer({ min: 0, max: 99 }),
    fc.integer({ min: 0, max: 99 }),
    fc.integer({ min: 0, max: 99 }),
    fc.option(fc.integer({ min: 0, max: 999_999 }), { nil: undefined }),
    fc.constantFrom('Z', '+00:00', '-05:30', '+14:00'),
  )
  .map(
    ([y, mo, d, h, mi, s, frac, zone]) =>
      `${pad(y, 4)}-${pad(mo, 2)}-${pad(d, 2)}T${pad(h, 2)}:${pad(mi, 2)}:${pad(s, 2)}${
        frac === undefined ? '' : `.${frac}`
      }${zone}`,
  );
/** Any text PostgreSQL can store (no NUL; whole code points, so UTF-8 round-trips). */
const anyText = fc.string({ unit: 'grapheme', maxLength: 80 }).filter((s) => !s.includes('\0'));
const text = fc.oneof(uuidLike, timestampLike, anyText, fc.constant('2024-13-45T99:99:99Z'));

describe('Data API parameters: types come from the statement, never from the value', () => {
  let t: TestDatabase;
  let api: Awaited<ReturnType<typeof localDataApi>>;
  beforeAll(async () => {
    t = await createTestDatabase('data_api_params', { migrated: false });
    api = await localDataApi(t.url, t.name);
    await t.db.query('CREATE TABLE texts (id serial PRIMARY KEY, v text NOT NULL)');
  });
  afterAll(async () => {
    await api?.close();
    await t?.drop();
  });

  it('a string parameter is sent as it is, with no typeHint', () => {
    fc.assert(
      fc.property(text, (s) => {
        expect(toSqlParameter('p1', s)).toEqual({ name: 'p1', value: { stringValue: s } });
      }),
      runs(500),
    );
  });

  it(
    'strings round-trip unchanged through the endpoint and PostgreSQL (cast, uncast, stored)',
    async () => {
      await fc.assert(
        fc.asyncProperty(text, async (s) => {
          const { rows } = await api.db.query<{ cast: string; plain: string }>(
            'SELECT $1::text AS cast, $2 AS plain',
            [s, s],
          );
          expect(rows[0]).toEqual({ cast: s, plain: s });
          const stored = await api.db.transaction(async (tx) => {
            const { rows: ins } = await tx.query<{ id: number }>(
              'INSERT INTO texts (v) VALUES ($1) RETURNING id',
              [s],
            );
            const { rows: back } = await tx.query<{ v: string }>(
              'SELECT v FROM texts WHERE id = $1',
              [ins[0]?.id as number],
            );
            return back[0]?.v;
          });
          expect(stored).toBe(s);
        }),
        runs(30),
      );
    },
    TIMEOUT,
  );

  it(
    'a statement that casts gets its type: uuid (any case) and timestamptz (any offset)',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          uuidLike,
          fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }),
          async (u, d) => {
            const iso = d.toISOString().replace('Z', '+00:00');
            const { rows } = await api.db.query<{ u: string; ts: Date; same: boolean }>(
              'SELECT $1::uuid::text AS u, $2::timestamptz AS ts, $2::timestamptz = $3 AS same',
              [u, iso, d],
            );
            expect(rows[0]?.u).toBe(u.toLowerCase());
            expect(rows[0]?.ts?.getTime()).toBe(d.getTime());
            expect(rows[0]?.same).toBe(true);
          },
        ),
        runs(40),
      );
    },
    TIMEOUT,
  );

  it('an uncast string is character varying, as on AWS: comparing it with a uuid fails', async () => {
    await expect(
      api.db.query('SELECT gen_random_uuid() = $1 AS eq', ['0f8fad5b-d9cb-469f-a165-70867728950e']),
    ).rejects.toThrow(/operator does not exist: uuid = character varying/);
  });
});
