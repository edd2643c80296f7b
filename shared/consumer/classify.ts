import { DbError, TransientDbError } from '../db/errors.js';
import { EnvelopeError } from '../envelope/errors.js';
import type { ErrorClass } from '../port/types.js';
import { PermanentMessageError } from './errors.js';

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
]);

/** Classifies an error raised while processing one message. */
export function classifyError(err: unknown): ErrorClass {
  if (err instanceof EnvelopeError || err instanceof PermanentMessageError) return 'permanent';
  if (err instanceof TransientDbError) return 'transient';
  if (err instanceof DbError) return 'unknown';
  const code = (err as { code?: unknown })?.code;
  if (typeof code === 'string' && CONNECTION_CODES.has(code)) return 'transient';
  return 'unknown';
}

/**
 * True when the database itself is unreachable (as opposed to one statement failing): the use
 * case then stops trying the rest of a batch one by one (each gets the same retry outcome), and
 * the retry outcome says so (`infrastructure`).
 */
export function isInfrastructureError(err: unknown): boolean {
  if (!(err instanceof TransientDbError)) return false;
  const code = err.code;
  if (code === undefined) return true; // connection terminated / timeout without SQLSTATE
  return (
    code.startsWith('08') ||
    code.startsWith('57P') ||
    CONNECTION_CODES.has(code) ||
    code === '53300'
  );
}

/** A short, single-line error text for logs and diagnoses: never the payload. */
export function shortError(err: unknown, max = 200): string {
  const e = err as { name?: string; message?: string };
  const text = `${e?.name ?? 'Error'}: ${e?.message ?? String(err)}`.replace(/\s+/g, ' ');
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
