import { randomUUID } from 'node:crypto';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { localLambdaContext } from '../../devkit/triggers/lambdaContext.js';
import { createPlaceOrderHandler, MAX_BODY_BYTES } from '../../functions/place-order/handler.js';
import { createLogger } from '../../shared/index.js';
import type { OrderService, PlaceOrderCommand } from '../../shared/orders/OrderService.js';

/**
 * Property-based tests of `POST /orders` through the real place-order handler (middy stack:
 * header normalizer, correlation id, JSON errors, body limit, JSON body parser, router,
 * validation), with the order service replaced by a recorder. Every body is either
 * accepted (201, and the service got exactly the fields sent) or refused with a 4xx whose JSON
 * names the field and the reason; never a 500, never a crash.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20_261_129);
const RUNS = Number(process.env.FUZZ_RUNS ?? 1);
const TIMEOUT = 10_000 * Math.max(1, RUNS);
const runs = (n: number) => ({ seed: SEED, numRuns: Math.max(1, Math.round(n * RUNS)) });

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

// ---------------------------------------------------------------------------------------------
// The handler, with a recording order service.

const placed: PlaceOrderCommand[] = [];
const orders = {
  place: async (cmd: PlaceOrderCommand) => {
    placed.push(cmd);
    return { orderId: cmd.orderId ?? randomUUID(), eventId: randomUUID(), created: true };
  },
} as unknown as OrderService;
const handler = createPlaceOrderHandler({ orders, logger: createLogger('place-order-fuzz') });

interface Request {
  body?: string;
  contentType?: string | undefined;
  base64?: boolean;
  correlationId?: string;
}

interface Reply {
  status: number;
  headers: Record<string, string>;
  json: Record<string, unknown>;
}

async function post(req: Request): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (req.contentType !== undefined) headers['Content-Type'] = req.contentType;
  if (req.correlationId !== undefined) headers['X-Correlation-Id'] = req.correlationId;
  const body =
    req.body === undefined
      ? undefined
      : req.base64
        ? Buffer.from(req.body, 'utf8').toString('base64')
        : req.body;
  const event = {
    version: '2.0',
    routeKey: '$default',
    rawPath: '/orders',
    rawQueryString: '',
    headers,
    requestContext: {
      accountId: '000000000000',
      apiId: 'fuzz',
      domainName: 'localhost',
      domainPrefix: 'localhost',
      http: {
        method: 'POST',
        path: '/orders',
        protocol: 'HTTP/1.1',
        sourceIp: '127.0.0.1',
        userAgent: 'fuzz',
      },
      requestId: randomUUID(),
      routeKey: '$default',
      stage: '$default',
      time: new Date().toUTCString(),
      timeEpoch: Date.now(),
    },
    ...(body === undefined ? {} : { body }),
    isBase64Encoded: req.base64 ?? false,
  } as APIGatewayProxyEventV2;
  const result = await handler(event, localLambdaContext('place-order'));
  const text = String(result.body ?? '');
  return {
    status: result.statusCode ?? 0,
    headers: (result.headers ?? {}) as Record<string, string>,
    json: JSON.parse(text) as Record<string, unknown>,
  };
}

// ---------------------------------------------------------------------------------------------
// The oracle: the documented contract of POST /orders, written without zod.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
const NIL_OR_MAX = /^(0{8}-0{4}-0{4}-0{4}-0{12}|f{8}-f{4}-f{4}-f{4}-f{12})$/i;
const FIELD_RULES = {
  sku: (v: unknown) =>
    typeof v === 'string' && v.length <= 64 && /^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(v),
  quantity: (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 10_000,
  orderId: (v: unknown) =>
    v === undefined || (typeof v === 'string' && (UUID.test(v) || NIL_OR_MAX.test(v))),
} as const;
type Field = keyof typeof FIELD_RULES;
const FIELDS = Object.keys(FIELD_RULES) as Field[];

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A key the JSON body parser refuses wherever it appears (prototype pollution guard). */
function hasForbiddenKey(v: unknown): boolean {
  if (Array.isArray(v)) return v.some(hasForbiddenKey);
  if (!isObject(v)) return false;
  return Object.entries(v).some(
    ([k, x]) =>
      k === '__proto__' ||
      (k === 'constructor' && isObject(x) && Object.hasOwn(x, 'prototype')) ||
      hasForbiddenKey(x),
  );
}

/** What the API must answer for a parsed JSON body: accepted, or the field it must name. */
function expected(body: unknown): { ok: true } | { ok: false; field: 'body' | Field } {
  if (hasForbiddenKey(body) || !isObject(body)) return { ok: false, field: 'body' };
  const bad = FIELDS.find((f) => !FIELD_RULES[f](body[f]));
  return bad ? { ok: false, field: bad } : { ok: true };
}

function expectRefusal(reply: Reply, status: number, field: string) {
  expect(reply.status, JSON.stringify(reply.json)).toBe(status);
  expect(reply.headers['content-type']).toBe('application/json');
  expect(reply.json.field).toBe(field);
  expect(typeof reply.json.error).toBe('string');
  const message = String(reply.json.message);
  expect(message.startsWith(`${field}: `), message).toBe(true);
  expect(message.length).toBeLessThan(200);
}

/** Checks a reply to a JSON body against the oracle. */
async function check(body: unknown, req: Omit<Request, 'body'> = {}) {
  const wire = JSON.stringify(body);
  const before = placed.length;
  const reply = await post({ contentType: 'application/json', ...req, body: wire });
  const want = expected(JSON.parse(wire));
  if (want.ok) {
    expect(reply.status, JSON.stringify(reply.json)).toBe(201);
    const sent = JSON.parse(wire) as Record<string, unknown>;
    expect(placed.slice(before)).toEqual([
      {
        sku: sent.sku,
        quantity: sent.quantity,
        orderId: sent.orderId,
        correlationId: expect.any(String),
      },
    ]);
    expect(reply.json.orderId).toEqual(sent.orderId ?? expect.any(String));
  } else {
    expectRefusal(reply, 400, want.field);
    expect(placed.length).toBe(before); // nothing reached the service
  }
  return reply;
}

// ---------------------------------------------------------------------------------------------
// Generators.

const jsonValue = fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json>;
const validSku = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/);
const extraKey = fc.oneof(
  fc.string({ maxLength: 10 }).filter((k) => !FIELDS.includes(k as Field)),
  fc.constantFrom('toString', 'hasOwnProperty', 'valueOf', 'note', 'SKU', 'Quantity'),
);
const validBody = fc
  .tuple(
    fc.record(
      { sku: validSku, quantity: fc.integer({ min: 1, max: 10_000 }), orderId: fc.uuid() },
      { requiredKeys: ['sku', 'quantity'] },
    ),
    fc.dictionary(extraKey, jsonValue, { maxKeys: 4 }),
  )
  .map(([known, extra]) => ({ ...extra, ...known }) as Record<string, Json>)
  .filter((b) => !hasForbiddenKey(b)); // those have a test of their own

/** Values chosen to sit on or just across each rule's edges. */
const edgeValue = fc.constantFrom<Json>(
  0,
  -1,
  1,
  10_000,
  10_001,
  1.5,
  -0,
  1e308,
  2 ** 53,
  '1',
  '',
  ' ',
  'a b',
  'a'.repeat(64),
  'a'.repeat(65),
  '-a',
  '.a',
  'ä',
  '😀',
  'a\u0000',
  'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11',
  'a0eebc999c0b4ef8bb6d6bb9bd380a11',
  '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}',
  '00000000-0000-0000-0000-000000000000',
  'ffffffff-ffff-ffff-ffff-ffffffffffff',
  null,
  true,
  [],
  {},
  ['a'],
);

const unicodeText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 80 }),
  fc.string({ unit: 'grapheme', maxLength: 80 }),
);

describe('POST /orders under fuzzing (the real handler, a recording order service)', {
  timeout: TIMEOUT,
}, () => {
  it('valid bodies with unknown fields are accepted; exactly sku, quantity and orderId reach the service', async () => {
    await fc.assert(
      fc.asyncProperty(validBody, async (body) => {
        const reply = await check(body);
        expect(reply.status).toBe(201);
      }),
      runs(300),
    );
  });

  it('a removed or retyped field is named in a 400, or the new value was valid there', async () => {
    await fc.assert(
      fc.asyncProperty(
        validBody,
        fc.constantFrom(...FIELDS),
        fc.option(fc.oneof(edgeValue, jsonValue, unicodeText), { nil: undefined }),
        async (body, field, value) => {
          const mutated = { ...body };
          if (value === undefined) delete mutated[field];
          else mutated[field] = value;
          const reply = await check(mutated);
          if (value === undefined && field !== 'orderId') {
            expect(reply.json.message).toBe(`${field}: is required`);
          }
        },
      ),
      runs(800),
    );
  });

  it('arbitrary JSON values and objects: accepted or refused as the contract says', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          jsonValue,
          fc.dictionary(fc.constantFrom(...FIELDS, 'x'), fc.oneof(edgeValue, jsonValue)),
        ),
        async (body) => {
          await check(body);
        },
      ),
      runs(400),
    );
  });

  it('prototype-pollution keys are refused naming body and the key, never reach a prototype', async () => {
    await fc.assert(
      fc.asyncProperty(
        validBody,
        fc.constantFrom('__proto__', 'constructor'),
        fc.boolean(),
        async (body, key, nested) => {
          const payload = key === '__proto__' ? { sku: 'X', polluted: true } : { prototype: {} };
          const inner = `{"${key}":${JSON.stringify(payload)}}`;
          const wire = nested
            ? `{"extra":${inner},${JSON.stringify(body).slice(1)}`
            : `{"${key}":${JSON.stringify(payload)},${JSON.stringify(body).slice(1)}`;
          const before = placed.length;
          const reply = await post({ contentType: 'application/json', body: wire });
          expectRefusal(reply, 400, 'body');
          expect(reply.json.message).toBe(`body: forbidden key "${key}"`);
          expect(placed.length).toBe(before);
          expect(({} as Record<string, unknown>).polluted).toBeUndefined();
        },
      ),
      runs(50),
    );
  });

  it.each([
    ['{"__proto__":{"sku":"a"},"sku":"b","quantity":1}', 'body: forbidden key "__proto__"'],
    [
      '{"sku":"b","quantity":1,"x":{"constructor":{"prototype":{}}}}',
      'body: forbidden key "constructor"',
    ],
    ['{"sku":"b","quantity":1', 'body: not valid JSON'],
  ])(
    'regression: %s → 400 "%s" (a forbidden key used to be reported as "not valid JSON")',
    async (body, message) => {
      const reply = await post({ contentType: 'application/json', body });
      expectRefusal(reply, 400, 'body');
      expect(reply.json.message).toBe(message);
    },
  );

  it('bodies that are not JSON: 400 naming body; missing or foreign content types: 415', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          unicodeText,
          fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1')),
          validBody.map((b) => JSON.stringify(b).slice(0, -1)), // truncated
        ),
        fc.constantFrom<string | undefined>(
          'application/json',
          'application/json; charset=utf-8',
          'application/vnd.api+json',
          'APPLICATION/JSON',
          'text/plain',
          'application/x-www-form-urlencoded',
          'application/jsonp',
          undefined,
        ),
        fc.boolean(),
        async (text, contentType, base64) => {
          const json =
            contentType !== undefined &&
            /^application\/([a-z0-9.+-]+\+)?json(;|$)/i.test(contentType);
          let parsed: { value: unknown } | undefined;
          try {
            parsed = { value: JSON.parse(text) };
          } catch {
            parsed = undefined;
          }
          if (json && parsed) return void (await check(parsed.value, { contentType, base64 }));
          const reply = await post({ body: text, contentType, base64 });
          if (!json) {
            expectRefusal(reply, 415, 'body');
          } else {
            expectRefusal(reply, 400, 'body');
            expect(reply.json.message).toBe('body: not valid JSON');
          }
        },
      ),
      runs(400),
    );
  });

  it('an absent body is refused naming body', async () => {
    const reply = await post({ contentType: 'application/json' });
    expectRefusal(reply, 400, 'body');
    expect(reply.json.message).toBe('body: is required');
  });

  it('bodies over the limit: 413 naming body, whatever they contain', async () => {
    await fc.assert(
      fc.asyncProperty(
        validBody,
        fc.integer({ min: 1, max: 4_000 }),
        fc.constantFrom('a', 'é', '😀'),
        async (body, extra, unit) => {
          const base = JSON.stringify(body);
          const filler = unit.repeat(
            Math.ceil((MAX_BODY_BYTES - base.length) / Buffer.byteLength(unit)) + extra,
          );
          const wire = `{"pad":"${filler}",${base.slice(1)}`;
          expect(Buffer.byteLength(wire)).toBeGreaterThan(MAX_BODY_BYTES);
          const reply = await post({ contentType: 'application/json', body: wire });
          expectRefusal(reply, 413, 'body');
        },
      ),
      runs(30),
    );
  });

  it('any x-correlation-id header: a well-formed one is echoed, anything else is replaced', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/), unicodeText),
        validBody,
        async (correlationId, body) => {
          const reply = await check(body, { correlationId });
          const echoed = reply.headers['x-correlation-id'];
          if (/^[A-Za-z0-9._:-]{1,128}$/.test(correlationId)) expect(echoed).toBe(correlationId);
          else expect(echoed).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
          expect(placed.at(-1)?.correlationId).toBe(echoed);
        },
      ),
      runs(200),
    );
  });
});
