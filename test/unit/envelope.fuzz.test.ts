import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeEnvelope,
  type Envelope,
  EnvelopeError,
  encodeEnvelope,
  parseEnvelope,
} from '../../shared/index.js';

/**
 * Property-based tests of the envelope parser: whatever bytes or JSON arrive, the
 * parser either accepts them, and then the result satisfies the schema and round-trips, or throws
 * an `EnvelopeError` that names the offending field. Nothing else may escape.
 *
 * Runs are seeded (FUZZ_SEED overrides) so a failure can be replayed; FUZZ_RUNS scales them.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20_261_129);
const RUNS = Number(process.env.FUZZ_RUNS ?? 1);
/** Scaled runs need scaled time. */
// generous: a loaded 2-core CI machine runs the 1,500 mutations (some 60 kB strings) slowly
const TIMEOUT = 60_000 * Math.max(1, RUNS);
const runs = (n: number) => ({ seed: SEED, numRuns: Math.max(1, Math.round(n * RUNS)) });

/** A token that must never appear in an error message (diagnoses never carry the payload). */
const MARKER = 'Zq9MARKERx7';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

// ---------------------------------------------------------------------------------------------
// An independent oracle: what the schema (docs/design.md §8) promises, written without zod.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
const TYPE = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const nonEmpty = (v: unknown) => typeof v === 'string' && v.length >= 1 && v.length <= 256;

/** The rule for each pinned path, given the value found there (`undefined` = absent). */
const RULES: Record<string, (v: unknown) => boolean> = {
  id: (v) =>
    typeof v === 'string' &&
    (UUID.test(v) || /^(0{8}-0{4}-0{4}-0{4}-0{12}|f{8}-f{4}-f{4}-f{4}-f{12})$/i.test(v)),
  type: (v) => typeof v === 'string' && v.length <= 128 && TYPE.test(v),
  schema_version: (v) => typeof v === 'string' && /^\d+\.\d+$/.test(v),
  occurred_at: (v) => typeof v === 'string' && isIsoInstant(v),
  producer: nonEmpty,
  correlation_id: nonEmpty,
  causation_id: (v) => v === null || nonEmpty(v),
  aggregate: isObject,
  'aggregate.type': nonEmpty,
  'aggregate.id': nonEmpty,
  'aggregate.version': (v) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 1,
  data: isObject,
};
const PATHS = Object.keys(RULES);

/** `YYYY-MM-DDTHH:MM:SS(.frac)?(Z|±HH:MM)` naming a day that exists. */
function isIsoInstant(v: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(:(\d{2})(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.exec(
    v,
  );
  if (!m) return false;
  const [y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0] = [
    m[1],
    m[2],
    m[3],
    m[4],
    m[5],
    m[7] ?? '0',
  ].map(Number);
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59) return false;
  const days = new Date(Date.UTC(y, mo, 0)).getUTCDate();
  const offset = m[9] ?? 'Z';
  if (offset !== 'Z' && (Number(offset.slice(1, 3)) > 23 || Number(offset.slice(4)) > 59))
    return false;
  return d <= days;
}

const get = (obj: unknown, path: string): unknown =>
  path.split('.').reduce<unknown>((o, k) => (isObject(o) ? o[k] : undefined), obj);

function setPath(obj: Record<string, Json>, path: string, value: Json | undefined) {
  const keys = path.split('.');
  let o: Record<string, Json> = obj;
  for (const k of keys.slice(0, -1)) o = o[k] as Record<string, Json>;
  const last = keys[keys.length - 1] as string;
  if (value === undefined) delete o[last];
  else o[last] = value;
}

// ---------------------------------------------------------------------------------------------
// Generators.

const isoInstant = fc
  .tuple(
    fc.date({
      min: new Date('0001-01-01T00:00:00Z'),
      max: new Date('9999-12-31T23:59:59Z'),
      noInvalidDate: true,
    }),
    fc.constantFrom('Z', '+00:00', '+05:30', '-11:00'),
  )
  .map(([d, zone]) => d.toISOString().replace('Z', zone));

/** Any code point, lone surrogates included (they survive JSON as escapes). */
const anyText = (maxLength: number) =>
  fc.oneof(
    fc.string({ unit: 'binary', minLength: 1, maxLength }),
    fc.string({ unit: 'grapheme', minLength: 1, maxLength }),
    fc
      .array(fc.integer({ min: 0xd800, max: 0xdfff }), { minLength: 1, maxLength })
      .map((cs) => String.fromCharCode(...cs)),
  );
const fieldText = anyText(120); // ≤ 240 UTF-16 units: always within the 256 limit

/** Keys that must not reach a prototype, mixed with ordinary ones. */
const hostileKey = fc.oneof(
  fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty'),
  fc.string({ maxLength: 12 }),
);
const jsonValue = fc.jsonValue({ maxDepth: 4 }) as fc.Arbitrary<Json>;
const hostileObject: fc.Arbitrary<Record<string, Json>> = fc.dictionary(hostileKey, jsonValue, {
  maxKeys: 5,
});

const validEnvelope: fc.Arbitrary<Record<string, Json>> = fc.record({
  id: fc.uuid(),
  type: fc.oneof(
    fc.constantFrom('order.created', 'order.cancelled', 'inventory.reservation_rejected'),
    fc.stringMatching(/^[a-z][a-z0-9_]{0,8}(\.[a-z][a-z0-9_]{0,8}){1,3}$/),
  ),
  schema_version: fc.nat({ max: 999 }).map((minor) => `1.${minor}`),
  occurred_at: isoInstant,
  producer: fieldText,
  correlation_id: fieldText,
  causation_id: fc.option(fieldText, { nil: null }),
  aggregate: fc.record({
    type: fieldText,
    id: fieldText,
    version: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
  }),
  data: hostileObject,
});

/** `{ ...valid, unknownField }`: unknown top-level fields, including hostile keys. */
const validWithExtras = fc
  .tuple(validEnvelope, hostileObject)
  .map(([e, extra]) => ({ ...extra, ...e }) as Record<string, Json>);

// ---------------------------------------------------------------------------------------------
// Checks.

/** What zod keeps: a `__proto__` key is never copied (it would become the object's prototype). */
function withoutProtoKeys(value: Record<string, Json>): Record<string, Json> {
  const copy = (o: Record<string, Json>) =>
    Object.fromEntries(Object.entries(o).filter(([k]) => k !== '__proto__'));
  const out = copy(value);
  if (isObject(out.aggregate)) out.aggregate = copy(out.aggregate as Record<string, Json>);
  if (isObject(out.data)) out.data = copy(out.data as Record<string, Json>);
  return out;
}

/** Sorted-key JSON, so that two objects compare by content whatever their key order. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    isObject(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, v[k]]),
        )
      : v,
  );
}

function expectRejection(err: unknown, input?: unknown): EnvelopeError {
  if (!(err instanceof EnvelopeError)) {
    throw new Error(`not an EnvelopeError: ${String(err)} for ${safeShow(input)}`, { cause: err });
  }
  expect(err.field).toMatch(/^[a-z_]+(\.[a-z_]+)*$|^body$|^envelope$/);
  expect(err.message.startsWith(`${err.field}: `)).toBe(true);
  expect(err.message.length).toBeLessThan(300);
  expect(err.message).not.toContain(MARKER);
  return err;
}

const safeShow = (v: unknown) => {
  try {
    return JSON.stringify(v)?.slice(0, 300);
  } catch {
    return String(v);
  }
};

/** Accepted ⇒ the schema holds and nothing was silently changed, and it round-trips as bytes. */
function expectAccepted(input: Record<string, Json>, e: Envelope) {
  for (const path of PATHS) expect(RULES[path]?.(get(e, path)), path).toBe(true);
  expect(Number.isNaN(Date.parse(e.occurred_at))).toBe(false);
  expect(Object.getPrototypeOf(e)).toBe(Object.prototype);
  expect(canonical(e)).toBe(canonical(withoutProtoKeys(input)));
  const again = decodeEnvelope(encodeEnvelope(e));
  expect(canonical(again)).toBe(canonical(e));
}

/** Calls `fn`; returns the envelope or the error, failing on anything else. */
function attempt(fn: () => Envelope, input: unknown): Envelope | EnvelopeError {
  try {
    return fn();
  } catch (err) {
    return expectRejection(err, input);
  }
}

const oracleValid = (v: unknown) =>
  isObject(v) &&
  PATHS.every((p) => RULES[p]?.(get(v, p))) &&
  Number.parseInt(String(v.schema_version), 10) === 1;

describe('envelope parser under fuzzing', { timeout: TIMEOUT }, () => {
  it('arbitrary bytes: decodeEnvelope accepts or throws EnvelopeError naming the field', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
          fc.string({ unit: 'binary', maxLength: 300 }),
          fc.string({ maxLength: 300 }).map((s) => `{"id":"${s}`), // truncated JSON
        ),
        (body) => {
          const out = attempt(() => decodeEnvelope(body), body);
          if (out instanceof EnvelopeError) {
            // not JSON at all → `body`; JSON of the wrong shape → the field
            let isJson = true;
            try {
              JSON.parse(typeof body === 'string' ? body : body.toString('utf8'));
            } catch {
              isJson = false;
            }
            if (!isJson) expect(out.message).toBe('body: not valid JSON');
            else expect(out.field).not.toBe('body');
          }
        },
      ),
      runs(1000),
    );
  });

  it('arbitrary JSON values: parseEnvelope agrees with the oracle, never crashes', () => {
    fc.assert(
      fc.property(fc.oneof(jsonValue, hostileObject, fc.anything({ maxDepth: 3 })), (value) => {
        const out = attempt(() => parseEnvelope(value), value);
        expect(out instanceof EnvelopeError).toBe(!oracleValid(value));
      }),
      runs(400),
    );
  });

  it('valid envelopes (unicode, lone surrogates, huge numbers, unknown and hostile keys) are accepted unchanged and round-trip', () => {
    fc.assert(
      fc.property(validWithExtras, (input) => {
        const wire = JSON.stringify(input);
        const e = decodeEnvelope(Buffer.from(wire, 'utf8'));
        expectAccepted(JSON.parse(wire) as Record<string, Json>, e);
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      }),
      runs(300),
    );
  });

  it('prototype-pollution keys: never reach a prototype, never stand in for a missing field', () => {
    fc.assert(
      fc.property(
        validEnvelope,
        fc.constantFrom(...PATHS.filter((p) => !p.startsWith('aggregate.'))),
        (input, removed) => {
          // `{"__proto__": {<the missing field>, polluted}}` as JSON text: an own key after parsing
          const hidden = { [removed]: input[removed], polluted: true };
          const rest = Object.fromEntries(Object.entries(input).filter(([k]) => k !== removed));
          const wire = `{"__proto__":${JSON.stringify(hidden)},${JSON.stringify(rest).slice(1)}`;
          const out = attempt(() => decodeEnvelope(wire), wire);
          expect(out).toBeInstanceOf(EnvelopeError);
          expect((out as EnvelopeError).field).toBe(removed);
          expect(({} as Record<string, unknown>).polluted).toBeUndefined();
          expect(Object.hasOwn(Object.prototype, 'polluted')).toBe(false);
        },
      ),
      runs(100),
    );
  });

  it('mutated valid envelopes: a removed or retyped field is named, or the value was valid there', () => {
    const mutation = fc.oneof(
      fc.record({ kind: fc.constant('remove' as const) }),
      fc.record({ kind: fc.constant('retype' as const), value: jsonValue }),
      fc.record({
        kind: fc.constant('huge' as const),
        value: fc
          .tuple(fc.string({ minLength: 1, maxLength: 3 }), fc.integer({ min: 200, max: 60_000 }))
          .map(([s, n]) => `${MARKER}${s.repeat(n)}`),
      }),
      fc.record({
        kind: fc.constant('text' as const),
        value: fc.oneof(anyText(300), fc.constant(''), fc.constant(MARKER)),
      }),
      fc.record({
        kind: fc.constant('number' as const),
        value: fc.oneof(
          fc.double(),
          fc.constantFrom(0, -1, 1.5, 2 ** 53, 2 ** 53 + 2, 1e308, -0),
        ) as fc.Arbitrary<Json>,
      }),
    );
    fc.assert(
      fc.property(validEnvelope, fc.constantFrom(...PATHS), mutation, (input, path, m) => {
        const mutated = structuredClone(input);
        const value = m.kind === 'remove' ? undefined : (m.value as Json);
        setPath(mutated, path, value);
        const wire = JSON.stringify(mutated);
        const out = attempt(() => decodeEnvelope(wire), mutated);
        const valid = oracleValid(JSON.parse(wire));
        if (valid) {
          expect(out).not.toBeInstanceOf(EnvelopeError);
          expectAccepted(JSON.parse(wire) as Record<string, Json>, out as Envelope);
        } else {
          expect(out, `${path} ← ${safeShow(value)}`).toBeInstanceOf(EnvelopeError);
          const field = (out as EnvelopeError).field;
          // the mutated field, or inside it (a retyped `aggregate` names its first bad member)
          expect(field === path || field.startsWith(`${path}.`), `${field} vs ${path}`).toBe(true);
        }
      }),
      runs(1500),
    );
  });

  it('an unsupported schema major is named as such, whatever the minor', () => {
    fc.assert(
      fc.property(validEnvelope, fc.integer({ min: 2, max: 10_000 }), fc.nat(), (e, major, n) => {
        const out = attempt(
          () => parseEnvelope({ ...e, schema_version: `${major}.${n}` }),
          e,
        ) as EnvelopeError;
        expect(out).toBeInstanceOf(EnvelopeError);
        expect(out.field).toBe('schema_version');
        expect(out.unsupportedVersion).toBe(true);
      }),
      runs(100),
    );
  });

  it('deep nesting in data is accepted without recursion trouble, and round-trips up to depth 1000', () => {
    fc.assert(
      fc.property(
        validEnvelope,
        fc.integer({ min: 1, max: 1_000 }),
        fc.boolean(),
        (e, depth, arrays) => {
          let nested: Json = 'leaf';
          for (let i = 0; i < depth; i++) nested = arrays ? [nested] : { k: nested };
          const input = { ...e, data: { deep: nested } };
          expectAccepted(input, decodeEnvelope(JSON.stringify(input)));
        },
      ),
      runs(30),
    );
    // far deeper than any serializer round-trips: still decoded or rejected, never a crash
    const e = fc.sample(validEnvelope, { seed: SEED, numRuns: 1 })[0] as Record<string, Json>;
    const depth = 200_000;
    const rest = JSON.stringify({ ...e, data: undefined }).slice(1);
    const wire = `{"data":{"deep":${'['.repeat(depth)}${']'.repeat(depth)}},${rest}`;
    expect(decodeEnvelope(wire).data).toHaveProperty('deep');
  });
});
