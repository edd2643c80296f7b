import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { EnvelopeError } from './errors.js';
import { currentTraceId } from './trace.js';

/** The schema major versions this code understands. Anything else is a permanent error. */
export const SUPPORTED_SCHEMA_MAJORS = [1] as const;
export const CURRENT_SCHEMA_VERSION = '1.0';

const uuid = z.uuid({ message: 'must be a UUID' });
const nonEmpty = z.string().min(1, 'must not be empty').max(256, 'must be at most 256 characters');

/**
 * The envelope (docs/design.md §8, pinned field names). Unknown fields are tolerated (kept, not validated)
 * so a newer producer can add fields without breaking an older consumer.
 */
export const envelopeSchema = z.looseObject({
  id: uuid,
  type: z
    .string()
    .regex(/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/, 'must look like "order.created"')
    .max(128),
  schema_version: z.string().regex(/^\d+\.\d+$/, 'must be "MAJOR.MINOR"'),
  occurred_at: z.iso.datetime({ offset: true, message: 'must be an ISO-8601 timestamp' }),
  producer: nonEmpty,
  correlation_id: nonEmpty,
  causation_id: nonEmpty.nullable(),
  /**
   * Optional (older producers do not set it): the trace id of the invocation that produced the
   * event (see `currentTraceId`), carried unchanged through retries, parking and redrive.
   */
  trace_id: z.string().min(1).max(128).optional(),
  aggregate: z.looseObject({
    type: nonEmpty,
    id: nonEmpty,
    version: z.number().int().min(1, 'must be ≥ 1'),
  }),
  data: z.record(z.string(), z.unknown()),
});

export type Envelope = z.infer<typeof envelopeSchema>;

export function schemaMajor(version: string): number {
  return Number.parseInt(version.split('.')[0] ?? '', 10);
}

/** Validates a decoded envelope. Throws `EnvelopeError` naming the first bad field. */
export function parseEnvelope(value: unknown): Envelope {
  const parsed = envelopeSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.join('.') || 'envelope';
    throw new EnvelopeError(`${field}: ${issue?.message ?? 'invalid'}`, field, {
      cause: parsed.error,
    });
  }
  const major = schemaMajor(parsed.data.schema_version);
  if (!(SUPPORTED_SCHEMA_MAJORS as readonly number[]).includes(major)) {
    throw new EnvelopeError(
      `schema_version: major ${major} is not supported (supported: ${SUPPORTED_SCHEMA_MAJORS.join(', ')})`,
      'schema_version',
      { unsupportedVersion: true },
    );
  }
  return parsed.data;
}

/** Decodes and validates a message body (UTF-8 JSON). */
export function decodeEnvelope(body: Buffer | string): Envelope {
  let value: unknown;
  try {
    value = JSON.parse(typeof body === 'string' ? body : body.toString('utf8'));
  } catch (err) {
    // Not the parser's message: it quotes the body, and diagnoses must never carry the payload.
    throw new EnvelopeError('body: not valid JSON', 'body', { cause: err });
  }
  return parseEnvelope(value);
}

export function encodeEnvelope(envelope: Envelope): Buffer {
  return Buffer.from(JSON.stringify(envelope), 'utf8');
}

export interface NewEvent {
  type: string;
  aggregate: { type: string; id: string; version: number };
  data: Record<string, unknown>;
  correlationId: string;
  causationId?: string | null;
  producer: string;
  /** Defaults to now. */
  occurredAt?: Date;
  /** Defaults to a new random UUID. Only the outbox writer creates ids. */
  id?: string;
  /** Defaults to the current invocation's trace id (`currentTraceId`). */
  traceId?: string | undefined;
}

/** Builds a valid envelope for a new event; the id is created here, once, and never changes. */
export function newEnvelope(e: NewEvent): Envelope {
  return parseEnvelope({
    id: e.id ?? randomUUID(),
    type: e.type,
    schema_version: CURRENT_SCHEMA_VERSION,
    occurred_at: (e.occurredAt ?? new Date()).toISOString(),
    producer: e.producer,
    correlation_id: e.correlationId,
    causation_id: e.causationId ?? null,
    trace_id: e.traceId ?? currentTraceId(),
    aggregate: e.aggregate,
    data: e.data,
  });
}
