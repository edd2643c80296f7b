import { z } from 'zod';
import { ConfigError } from './errors.js';

/**
 * Credentials as Secrets Manager holds them: `{"username","password",…}` (a database secret CDK
 * generates adds engine, host, port and dbname; Amazon MQ's event source reads the same shape).
 */
const credentialsSchema = z.object({ username: z.string().min(1), password: z.string().min(1) });
export type Credentials = z.infer<typeof credentialsSchema>;

/** A secret's string as credentials, or a `ConfigError` naming `what` and the field. */
export function parseCredentials(secretString: string | undefined, what: string): Credentials {
  let json: unknown;
  try {
    json = JSON.parse(secretString ?? '');
  } catch {
    throw new ConfigError(`${what}: not JSON (expected {"username","password",…})`);
  }
  const parsed = credentialsSchema.safeParse(json);
  if (!parsed.success) {
    const fields = parsed.error.issues.map((i) => i.path.join('.') || '(root)').join(', ');
    throw new ConfigError(`${what}: missing or empty ${fields}`);
  }
  return parsed.data;
}
