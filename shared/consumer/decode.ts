import type { z } from 'zod';
import { decodeEnvelope, type Envelope, schemaMajor } from '../envelope/envelope.js';
import type { InboundMessage } from '../port/types.js';
import { PermanentMessageError } from './errors.js';

export interface DecodeRules {
  /** The consumer, named in the error for an event type it does not handle. */
  consumer: string;
  /** The event types this consumer handles: any other is a permanent error. */
  types: readonly string[];
  /** The `data` schema of an event type and schema major; none: a permanent error. */
  schemaFor: (type: string, major: number) => z.ZodType | undefined;
}

/**
 * Decodes an inbound message into its envelope with the checks every consumer makes, in this
 * order: the transport carried a message id; the body is a valid envelope of a supported schema
 * major; the message id equals the envelope id (the inbox claims by that id); the event type is one
 * the consumer handles; its `data` matches the schema of that type and major. The id comes back in
 * lower case (as the inbox's uuid column returns it).
 *
 * Throws `PermanentMessageError` or `EnvelopeError` (both classified permanent): such a message
 * will never succeed as it is. Error texts name the field, never the payload.
 */
export function decodeMessage(message: InboundMessage, rules: DecodeRules): Envelope {
  if (!message.messageId) throw new PermanentMessageError('message has no message id');
  const envelope = decodeEnvelope(message.body);
  if (envelope.id.toLowerCase() !== message.messageId.toLowerCase()) {
    throw new PermanentMessageError(
      `message id ${message.messageId} differs from envelope id ${envelope.id}`,
    );
  }
  if (!rules.types.includes(envelope.type)) {
    throw new PermanentMessageError(
      `event type ${envelope.type} is not handled by ${rules.consumer}`,
    );
  }
  const major = schemaMajor(envelope.schema_version);
  const schema = rules.schemaFor(envelope.type, major);
  if (!schema) {
    throw new PermanentMessageError(
      `schema_version: no data schema for ${envelope.type} major ${major}`,
    );
  }
  const data = schema.safeParse(envelope.data);
  if (!data.success) {
    const issue = data.error.issues[0];
    throw new PermanentMessageError(
      `data.${issue?.path.join('.')}: ${issue?.message ?? 'invalid'}`,
    );
  }
  // The inbox holds ids as PostgreSQL's uuid type, which reads them back in lower case: the
  // consumer compares in that form, so an upper-case id is not taken for a duplicate.
  return { ...envelope, id: envelope.id.toLowerCase() };
}
