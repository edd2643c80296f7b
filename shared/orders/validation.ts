import { z } from 'zod';
import { HttpError } from '../http/errors.js';

/** Body of `POST /orders`. Unknown fields are ignored; known ones must be exactly right. */
export const placeOrderBodySchema = z.object({
  sku: z
    .string({ error: 'must be a string' })
    .min(1, 'must not be empty')
    .max(64, 'must be at most 64 characters')
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'may contain only letters, digits, ".", "_" and "-"'),
  quantity: z
    .number({ error: 'must be a number' })
    .int('must be a whole number')
    .min(1, 'must be at least 1')
    .max(10_000, 'must be at most 10000'),
  orderId: z.uuid({ error: 'must be a UUID' }).optional(),
});

export type PlaceOrderBody = z.infer<typeof placeOrderBodySchema>;

export const orderIdSchema = z.uuid({ error: 'must be a UUID' });

/** Validates a decoded JSON body; throws a 400 `HttpError` naming the first bad field. */
export function parsePlaceOrderBody(body: unknown): PlaceOrderBody {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpError(400, 'ValidationError', 'body: must be a JSON object', { field: 'body' });
  }
  const parsed = placeOrderBodySchema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.join('.') || 'body';
    const missing =
      issue?.code === 'invalid_type' && (body as Record<string, unknown>)[field] === undefined;
    const message = missing ? 'is required' : issue?.message;
    throw new HttpError(400, 'ValidationError', `${field}: ${message}`, {
      field,
      cause: parsed.error,
    });
  }
  return parsed.data;
}

export function parseOrderId(value: string | undefined): string {
  const parsed = orderIdSchema.safeParse(value);
  if (!parsed.success) {
    throw new HttpError(400, 'ValidationError', 'orderId: must be a UUID', { field: 'orderId' });
  }
  return parsed.data;
}
