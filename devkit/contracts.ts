import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { EVENT_DATA_SCHEMAS } from '../shared/pipeline/events.js';

/**
 * Event contracts: the JSON Schema of each event type's `data` per schema major, committed under
 * `contracts/` so that a change to `events.ts` which would break a deployed producer or consumer is
 * caught in review and CI instead of in a parking lot. Within a major, producers and consumers of
 * different ages run side by side (a newer minor is accepted, parked messages are redriven weeks
 * later), so an incompatible change must be a new event type or a new major, never an edit.
 */

/** A JSON Schema as read from a file: plain JSON, keyword → value. */
export type JsonSchema = { readonly [keyword: string]: unknown };

/** Where the committed contracts live (the repo's top-level `contracts/` folder). */
export const CONTRACTS_DIR = resolve(import.meta.dirname, '../contracts');

/** `<type>.v<major>.schema.json`: one file per type and major, so a new major is a new file. */
export function contractFileName(type: string, major: number): string {
  return `${type}.v${major}.schema.json`;
}

/**
 * The JSON Schema of one event's `data`. The options are pinned rather than left to zod's defaults
 * so that the files only change when a schema does:
 * - `io: 'input'`: the contract is the JSON on the wire, which is what a consumer's `parse` takes
 *   as *input*. With `'output'`, a field with a `.default()` would show as required (old producers
 *   may omit it) and transforms would describe the parsed value, not the message.
 * - `target` pinned, so a zod upgrade cannot silently switch the dialect.
 * - `unrepresentable: 'throw'`: a transform or a Date must fail here, not become `{}` (accept
 *   anything), which would hide every later change from `checkCompatibility`.
 * - `cycles: 'throw'`, `reused: 'inline'`: no `$ref`/`$defs` with generated names that depend on
 *   traversal order; every file is self-contained and the checker need not resolve references.
 * - `metadata` left to zod's global registry, where `.describe()`/`.meta()` put descriptions: they
 *   document the contract and `checkCompatibility` ignores them.
 * The result goes through JSON so it is exactly what a file holds (no hidden `~standard` property).
 */
export function contractSchema(type: string, major: number, schema: z.ZodType): JsonSchema {
  const { $schema, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io: 'input',
    unrepresentable: 'throw',
    cycles: 'throw',
    reused: 'inline',
  });
  return JSON.parse(
    JSON.stringify({
      $schema,
      $id: contractFileName(type, major),
      title: `${type} v${major}`,
      description: `The data of ${type} events, schema major ${major} (any ${major}.x minor).`,
      ...rest,
    }),
  ) as JsonSchema;
}

/** Every contract the code defines now, keyed by file name, in file-name order. */
export function currentContracts(): Record<string, JsonSchema> {
  const byFile: Record<string, JsonSchema> = {};
  const types = EVENT_DATA_SCHEMAS as Record<string, Record<number, z.ZodType>>;
  for (const [type, byMajor] of Object.entries(types)) {
    for (const [major, schema] of Object.entries(byMajor)) {
      byFile[contractFileName(type, Number(major))] = contractSchema(type, Number(major), schema);
    }
  }
  return Object.fromEntries(Object.entries(byFile).sort(([a], [b]) => a.localeCompare(b)));
}

/**
 * The committed contracts in `dir`, keyed by file name (other files, like README.md, ignored);
 * none when the folder does not exist yet, so the first `update` simply adds them all.
 */
export function readContracts(dir: string = CONTRACTS_DIR): Record<string, JsonSchema> {
  if (!existsSync(dir)) return {};
  const files = readdirSync(dir).filter((f) => f.endsWith('.schema.json'));
  return Object.fromEntries(
    files.sort().map((f) => [f, JSON.parse(readFileSync(join(dir, f), 'utf8')) as JsonSchema]),
  );
}

/** How the committed contracts differ from the current ones. */
export interface ContractsDiff {
  /** Generated now but not committed (a new type or major): `update` adds them. */
  added: string[];
  /** Committed and generated, but not equal (compatible or not). */
  changed: string[];
  /** Committed but no longer generated. */
  removed: string[];
  /** `file: path: what` for every breaking change, removed contracts included. */
  breaking: string[];
}

/**
 * Compares committed and current contracts. Formatting and key order do not matter (the files are
 * compared as JSON values), so reformatting `contracts/` never makes them "outdated". A removed
 * contract is breaking: messages of that type and major may still sit in queues, outboxes and the
 * parking lot; retiring one is a deliberate act (delete the file), not a side effect.
 */
export function diffContracts(
  committed: Record<string, JsonSchema>,
  current: Record<string, JsonSchema>,
): ContractsDiff {
  const diff: ContractsDiff = { added: [], changed: [], removed: [], breaking: [] };
  for (const [file, schema] of Object.entries(current)) {
    const old = committed[file];
    if (old === undefined) {
      diff.added.push(file);
    } else if (!isDeepStrictEqual(old, schema)) {
      diff.changed.push(file);
      diff.breaking.push(...checkCompatibility(old, schema).map((b) => `${file}: ${b}`));
    }
  }
  for (const file of Object.keys(committed)) {
    if (current[file] === undefined) {
      diff.removed.push(file);
      diff.breaking.push(`${file}: no longer generated (messages of it may still be in flight)`);
    }
  }
  return diff;
}

/** Keywords that document but do not validate: changing them is always compatible. */
const ANNOTATIONS = new Set([
  '$schema',
  '$id',
  '$comment',
  'title',
  'description',
  'default',
  'examples',
  'deprecated',
  'readOnly',
  'writeOnly',
]);
/** Bounds that reject more values when raised (lower bounds) or lowered (upper bounds). */
const LOWER_BOUNDS = ['minimum', 'exclusiveMinimum', 'minLength', 'minItems', 'minProperties'];
const UPPER_BOUNDS = ['maximum', 'exclusiveMaximum', 'maxLength', 'maxItems', 'maxProperties'];
/** Keywords compared by a specific rule below; any other validation keyword must not change. */
const UNDERSTOOD = new Set([
  ...ANNOTATIONS,
  ...LOWER_BOUNDS,
  ...UPPER_BOUNDS,
  'type',
  'enum',
  'const',
  'format',
  'pattern',
  'multipleOf',
  'uniqueItems',
  'properties',
  'required',
  'additionalProperties',
  'items',
]);

/**
 * The breaking changes from `old` (committed) to `cur` (current), two schemas of the same type and
 * major, as `path: what` lines, paths below `path` (empty = compatible). Old and new producers and
 * consumers of one major run side by side, so the rule has two halves:
 *
 * 1. **Structure is fixed** (a consumer built on the committed schema reads what new producers
 *    write): a property is never removed, never retyped (widenings like integer → number or adding
 *    `null` too: old consumers would reject or mishandle those values), and a required property
 *    stays required. A closed object (`additionalProperties: false`) gets no new property.
 * 2. **Accepted values only widen** (the new schema accepts every message valid under the committed
 *    one: old producers, and old messages redriven from the parking lot): no new required property,
 *    no optional one made required, no enum value or const removed, no format or pattern added or
 *    changed, no bound tightened, no new restriction on unknown properties.
 *
 * Compatible: a new optional property, a loosened bound, an added enum value, annotation changes.
 * A widened value set is compatible for the contract but old consumers still reject the new
 * values, so consumers must be deployed before any producer emits them. Keywords this check does
 * not understand (`anyOf`, `$ref`, …) count as breaking whenever they change: it never guesses.
 */
export function checkCompatibility(old: JsonSchema, cur: JsonSchema, path = ''): string[] {
  const issues: string[] = [];
  const report = (what: string, at = path) => issues.push(`${at || '(root)'}: ${what}`);

  const oldTypes = typesOf(old);
  const curTypes = typesOf(cur);
  if (oldTypes !== curTypes) {
    report(`type changed from ${oldTypes} to ${curTypes}`);
    return issues; // everything below would be noise about the same change
  }

  const oldValues = allowedValues(old);
  const curValues = allowedValues(cur);
  if (curValues && !oldValues) report(`now restricted to ${list(curValues)}`);
  const removed =
    curValues && oldValues?.filter((o) => !curValues.some((c) => isDeepStrictEqual(o, c)));
  if (removed?.length) report(`no longer accepts ${list(removed)}`);

  for (const keyword of ['format', 'pattern', 'multipleOf']) {
    if (cur[keyword] !== undefined && cur[keyword] !== old[keyword]) {
      const was = old[keyword] === undefined ? 'added' : `was ${JSON.stringify(old[keyword])}`;
      report(`${keyword} ${JSON.stringify(cur[keyword])} (${was})`);
    }
  }
  if (cur.uniqueItems === true && old.uniqueItems !== true) report('uniqueItems added');
  for (const [keyword, o, c] of bounds(old, cur)) {
    report(o === undefined ? `${keyword} ${c} added` : `${keyword} tightened from ${o} to ${c}`);
  }

  compareObject(path, old, cur, report, issues);
  if (old.items !== undefined || cur.items !== undefined) {
    issues.push(...checkCompatibility(asSchema(old.items), asSchema(cur.items), `${path}[]`));
  }

  for (const keyword of new Set([...Object.keys(old), ...Object.keys(cur)])) {
    if (!UNDERSTOOD.has(keyword) && !isDeepStrictEqual(old[keyword], cur[keyword])) {
      report(`"${keyword}" changed, which this check cannot analyse, so it counts as breaking`);
    }
  }
  return issues;
}

/** The bounds `cur` adds or tightens, as `[keyword, old value, new value]`. */
function bounds(old: JsonSchema, cur: JsonSchema): [string, unknown, number][] {
  const tightened: [string, unknown, number][] = [];
  for (const [keywords, stricter] of [
    [LOWER_BOUNDS, (o: number, c: number) => c > o],
    [UPPER_BOUNDS, (o: number, c: number) => c < o],
  ] as const) {
    for (const keyword of keywords) {
      const o = old[keyword];
      const c = cur[keyword];
      if (typeof c === 'number' && (typeof o !== 'number' || stricter(o, c))) {
        tightened.push([keyword, o, c]);
      }
    }
  }
  return tightened;
}

function compareObject(
  path: string,
  old: JsonSchema,
  cur: JsonSchema,
  report: (what: string, at?: string) => void,
  issues: string[],
): void {
  const oldProps = asProperties(old.properties);
  const curProps = asProperties(cur.properties);
  const oldRequired = asStrings(old.required);
  const curRequired = asStrings(cur.required);
  const child = (name: string) => (path ? `${path}.${name}` : name);

  for (const [name, oldProp] of Object.entries(oldProps)) {
    const curProp = curProps[name];
    if (curProp === undefined) {
      report('removed (consumers built on the committed schema read it)', child(name));
      continue;
    }
    if (oldRequired.includes(name) && !curRequired.includes(name)) {
      report('made optional (consumers built on the committed schema require it)', child(name));
    }
    issues.push(...checkCompatibility(oldProp, curProp, child(name)));
  }
  for (const name of curRequired.filter((n) => !oldRequired.includes(n))) {
    report(
      name in oldProps
        ? 'made required (old producers may omit it)'
        : 'new required property (old producers do not write it)',
      child(name),
    );
  }
  if (old.additionalProperties === false) {
    for (const name of Object.keys(curProps).filter((n) => !(n in oldProps))) {
      report('new property in a closed object (old consumers reject it)', child(name));
    }
  }

  const oldExtra = old.additionalProperties;
  const curExtra = cur.additionalProperties;
  if (curExtra === false && oldExtra !== false) {
    report('unknown properties no longer accepted (additionalProperties: false)');
  } else if (oldExtra !== false && curExtra !== false && !isDeepStrictEqual(oldExtra, curExtra)) {
    issues.push(...checkCompatibility(asSchema(oldExtra), asSchema(curExtra), child('*')));
  }
}

/** `type` as a comparable string; absent means any type. */
function typesOf(schema: JsonSchema): string {
  const type = schema.type;
  if (type === undefined) return 'any';
  return Array.isArray(type) ? [...type].map(String).sort().join(' | ') : String(type);
}

/** The values `enum`/`const` allow, or undefined when they do not restrict. */
function allowedValues(schema: JsonSchema): unknown[] | undefined {
  if ('const' in schema) return [schema.const];
  return Array.isArray(schema.enum) ? schema.enum : undefined;
}

/** A sub-schema; `true` or absent accept anything, like `{}`. */
function asSchema(value: unknown): JsonSchema {
  if (value === undefined || value === true) return {};
  if (value === false) return { not: {} };
  return value as JsonSchema;
}

function asProperties(value: unknown): Record<string, JsonSchema> {
  return (value ?? {}) as Record<string, JsonSchema>;
}

function asStrings(value: unknown): string[] {
  return Array.isArray(value) ? value.map(String) : [];
}

function list(values: unknown[]): string {
  return values.map((v) => JSON.stringify(v)).join(', ');
}
