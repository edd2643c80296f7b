import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { InboundMessage } from '../../shared/index.js';
import {
  classifyError,
  decodeMessage,
  type Envelope,
  encodeEnvelope,
  newEnvelope,
} from '../../shared/index.js';
import { dataSchemaFor } from '../../shared/pipeline/events.js';

const event = (type = 'audit.noted', data: Record<string, unknown> = { note: 'hello' }) =>
  newEnvelope({
    type,
    aggregate: { type: 'thing', id: randomUUID(), version: 1 },
    data,
    correlationId: 'c-1',
    producer: 'test',
  });
const inbound = (e: Envelope, patch: Partial<InboundMessage> = {}): InboundMessage => ({
  messageId: e.id,
  body: encodeEnvelope(e),
  attempt: 0,
  redelivered: false,
  ...patch,
});
const schemas: Record<string, z.ZodType> = {
  'audit.noted': z.looseObject({ note: z.string().min(1) }),
};
const rules = {
  consumer: 'audit',
  types: ['audit.noted', 'audit.unschemaed'],
  schemaFor: (type: string, major: number) => (major === 1 ? schemas[type] : undefined),
};
/** The error `decodeMessage` throws, checked to be permanent. */
const refusal = (m: InboundMessage) => {
  try {
    decodeMessage(m, rules);
  } catch (err) {
    expect(classifyError(err)).toBe('permanent');
    return (err as Error).message;
  }
  throw new Error('decoded');
};

describe('decodeMessage', () => {
  it('returns the envelope of a valid message of a handled type', () => {
    const e = event();
    expect(decodeMessage(inbound(e), rules)).toEqual(e);
  });

  it('returns an upper-case id in lower case, as the inbox reads it back', () => {
    const e = event();
    const upper = { ...e, id: e.id.toUpperCase() };
    expect(decodeMessage(inbound(upper), rules).id).toBe(e.id);
  });

  it('refuses, as permanent, each generic violation, naming it but never the payload', () => {
    const e = event();
    expect(refusal(inbound(e, { messageId: undefined }))).toMatch(/no message id/);
    expect(refusal(inbound(e, { body: Buffer.from('SECRET{') }))).toBe('body: not valid JSON');
    expect(refusal(inbound(e, { messageId: randomUUID() }))).toMatch(/differs from envelope id/);
    expect(refusal(inbound({ ...e, schema_version: '9.0' }))).toMatch(/major 9 is not supported/);
    expect(refusal(inbound(event('other.thing')))).toBe(
      'event type other.thing is not handled by audit',
    );
    expect(refusal(inbound(event('audit.unschemaed')))).toMatch(/no data schema/);
    expect(refusal(inbound(event('audit.noted', { note: '' })))).toMatch(/^data\.note: /);
  });

  it('checks data against the registry it is given (the example events)', () => {
    const e = event('order.created', { orderId: randomUUID(), sku: 'A', quantity: 0 });
    expect(() =>
      decodeMessage(inbound(e), {
        consumer: 'x',
        types: ['order.created'],
        schemaFor: dataSchemaFor,
      }),
    ).toThrow(/data\.quantity/);
  });
});
