import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodeEnvelope, EnvelopeError, newEnvelope, parseEnvelope } from '../../shared/index.js';

const valid = () =>
  newEnvelope({
    type: 'order.created',
    aggregate: { type: 'order', id: randomUUID(), version: 1 },
    data: { sku: 'a', quantity: 1 },
    correlationId: 'c-1',
    producer: 'order-service',
  });

describe('Envelope', () => {
  it('newEnvelope creates an id once and fills every pinned field', () => {
    const e = valid();
    expect(Object.keys(e).sort()).toEqual(
      [
        'aggregate',
        'causation_id',
        'correlation_id',
        'data',
        'id',
        'occurred_at',
        'producer',
        'schema_version',
        'trace_id',
        'type',
      ].sort(),
    );
    expect(e.schema_version).toBe('1.0');
    // the trace id of the producing invocation (X-Ray's format; made here, where none runs)
    expect(e.trace_id).toMatch(/^1-[0-9a-f]{8}-[0-9a-f]{24}$/);
    expect(parseEnvelope(JSON.parse(JSON.stringify(e)))).toEqual(e);
  });

  it('tolerates unknown fields and keeps them', () => {
    const e = { ...valid(), extra: { a: 1 } };
    expect(parseEnvelope(e)).toMatchObject({ extra: { a: 1 } });
  });

  it.each([
    ['id', { id: 'nope' }],
    ['type', { type: 'Order Created' }],
    ['schema_version', { schema_version: '1' }],
    ['occurred_at', { occurred_at: 'yesterday' }],
    ['correlation_id', { correlation_id: '' }],
    ['aggregate.version', { aggregate: { type: 'order', id: 'x', version: 0 } }],
    ['data', { data: 'text' }],
  ])('names the bad field %s', (field, patch) => {
    const e = { ...valid(), ...patch };
    expect(() => parseEnvelope(e)).toThrow(EnvelopeError);
    try {
      parseEnvelope(e);
    } catch (err) {
      expect((err as EnvelopeError).field).toBe(field);
      expect((err as EnvelopeError).unsupportedVersion).toBe(false);
    }
  });

  it('an unknown schema major is a distinct, permanent error', () => {
    try {
      parseEnvelope({ ...valid(), schema_version: '2.0' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(EnvelopeError);
      expect((err as EnvelopeError).unsupportedVersion).toBe(true);
      expect((err as EnvelopeError).field).toBe('schema_version');
    }
    // a newer minor of a known major is fine
    expect(parseEnvelope({ ...valid(), schema_version: '1.7' }).schema_version).toBe('1.7');
  });

  it('decodeEnvelope rejects bodies that are not JSON, naming body', () => {
    expect(() => decodeEnvelope('{nope')).toThrow(/^body: not valid JSON/);
    expect(decodeEnvelope(Buffer.from(JSON.stringify(valid()))).type).toBe('order.created');
  });
});
