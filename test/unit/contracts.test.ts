import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  checkCompatibility,
  contractSchema,
  currentContracts,
  diffContracts,
  type JsonSchema,
  readContracts,
} from '../../devkit/contracts.js';

/** Builds a contract the way the real ones are built, so the cases run on zod's real output. */
const contract = (shape: z.ZodRawShape): JsonSchema =>
  contractSchema('test.event', 1, z.looseObject(shape));

const base = {
  orderId: z.uuid(),
  sku: z.string().min(1).max(64),
  quantity: z.number().int().min(1),
  price: z.number().min(0),
  reason: z.enum(['out_of_stock', 'unknown_sku']),
  note: z.string().optional(),
  customer: z.looseObject({ id: z.string(), name: z.string() }),
  lines: z.array(z.looseObject({ sku: z.string(), units: z.number().int() })),
};
const { quantity: _quantity, ...withoutQuantity } = base;

describe('committed contracts', () => {
  const committed = readContracts();
  const current = currentContracts();

  it('match what shared/envelope/events.ts generates now', () => {
    const { added, changed, removed } = diffContracts(committed, current);
    expect(
      { added, changed, removed },
      'contracts/ is out of date with events.ts: run `npm run contracts -- update`',
    ).toEqual({ added: [], changed: [], removed: [] });
    expect(Object.keys(committed).length).toBeGreaterThan(0);
  });

  it('are compatible with the current schemas', () => {
    expect(
      diffContracts(committed, current).breaking,
      'an incompatible change needs a new event type or major (contracts/README.md)',
    ).toEqual([]);
  });

  it('name their type and major in the file name, $id and title', () => {
    expect(current['order.created.v1.schema.json']).toMatchObject({
      $id: 'order.created.v1.schema.json',
      title: 'order.created v1',
      type: 'object',
    });
  });

  it('a contract that is no longer generated is breaking, a new one is not', () => {
    const { 'order.created.v1.schema.json': _dropped, ...fewer } = current;
    expect(diffContracts(current, fewer).breaking).toEqual([
      'order.created.v1.schema.json: no longer generated (messages of it may still be in flight)',
    ]);
    const grown = diffContracts(fewer, current);
    expect(grown.added).toEqual(['order.created.v1.schema.json']);
    expect(grown.breaking).toEqual([]);
  });
});

describe('checkCompatibility', () => {
  const old = contract(base);

  it('an identical schema is compatible', () => {
    expect(checkCompatibility(old, contract(base))).toEqual([]);
  });

  it.each<[string, z.ZodRawShape, RegExp[]]>([
    ['a field removed', withoutQuantity, [/^quantity: removed/]],
    [
      'a field retyped',
      { ...base, quantity: z.string() },
      [/^quantity: type changed from integer to string$/],
    ],
    [
      'number → integer',
      { ...base, price: z.number().int().min(0) },
      [/^price: type changed from number to integer/],
    ],
    ['optional → required', { ...base, note: z.string() }, [/^note: made required/]],
    ['a new required field', { ...base, priority: z.number() }, [/^priority: new required/]],
    [
      'an enum value removed',
      { ...base, reason: z.enum(['out_of_stock']) },
      [/^reason: no longer accepts "unknown_sku"/],
    ],
    [
      'a format added (zod adds its pattern too)',
      { ...base, sku: z.uuid() },
      [/^sku: format "uuid" \(added\)$/, /^sku: pattern "/],
    ],
    ['a max tightened', { ...base, sku: z.string().min(1).max(32) }, [/^sku: maxLength tightened/]],
    ['a min tightened', { ...base, quantity: z.number().int().min(2) }, [/^quantity: minimum/]],
    ['required → optional', { ...base, sku: base.sku.optional() }, [/^sku: made optional/]],
    [
      'a nested object field removed',
      { ...base, customer: z.looseObject({ id: z.string() }) },
      [/^customer\.name: removed/],
    ],
    [
      'a field removed inside array items',
      { ...base, lines: z.array(z.looseObject({ sku: z.string() })) },
      [/^lines\[\]\.units: removed/],
    ],
  ])('%s is breaking', (_name, shape, expected) => {
    const issues = checkCompatibility(old, contract(shape));
    expect(issues).toEqual(expected.map((re) => expect.stringMatching(re)));
  });

  it.each<[string, z.ZodRawShape]>([
    ['a new optional field', { ...base, giftWrap: z.boolean().optional() }],
    ['a loosened max', { ...base, sku: z.string().min(1).max(128) }],
    ['a loosened min', { ...base, quantity: z.number().int().min(0) }],
    ['an enum value added', { ...base, reason: z.enum(['out_of_stock', 'unknown_sku', 'other']) }],
    ['a description change', { ...base, sku: base.sku.describe('stock keeping unit') }],
  ])('%s is compatible', (_name, shape) => {
    expect(checkCompatibility(old, contract(shape))).toEqual([]);
  });

  it('an integer widened to number is breaking: old consumers reject the new values', () => {
    const issues = checkCompatibility(old, contract({ ...base, quantity: z.number().min(1) }));
    expect(issues).toEqual(['quantity: type changed from integer to number']);
  });

  it('a new field in a closed object is breaking, unknown fields made closed too', () => {
    const closed = contractSchema('test.event', 1, z.strictObject({ sku: z.string() }));
    const more = contractSchema(
      'test.event',
      1,
      z.strictObject({ sku: z.string(), x: z.string().optional() }),
    );
    expect(checkCompatibility(closed, more)).toEqual([
      'x: new property in a closed object (old consumers reject it)',
    ]);
    const open = contractSchema('test.event', 1, z.looseObject({ sku: z.string() }));
    expect(checkCompatibility(open, closed)).toEqual([
      '(root): unknown properties no longer accepted (additionalProperties: false)',
    ]);
  });

  it('a keyword it does not understand counts as breaking when it changes', () => {
    const a: JsonSchema = { type: 'object', properties: { v: { anyOf: [{ type: 'string' }] } } };
    const b: JsonSchema = {
      type: 'object',
      properties: { v: { anyOf: [{ type: 'string' }, { type: 'number' }] } },
    };
    expect(checkCompatibility(a, b)).toEqual([
      'v: "anyOf" changed, which this check cannot analyse, so it counts as breaking',
    ]);
  });
});
