import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';

/** PostgreSQL's default iteration count for SCRAM-SHA-256 verifiers (`scram_iterations`). */
export const SCRAM_ITERATIONS = 4096;

/** PostgreSQL's salt length for the verifiers it computes itself (bytes). */
export const SCRAM_SALT_BYTES = 16;

export interface ScramOptions {
  /** Default: 16 random bytes. */
  salt?: Buffer;
  /** Default {@link SCRAM_ITERATIONS}. */
  iterations?: number;
}

/**
 * The SCRAM-SHA-256 verifier of a password as PostgreSQL stores it in `pg_authid.rolpassword`:
 * `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64), per RFC 5802 / RFC 7677:
 * SaltedPassword = PBKDF2-HMAC-SHA-256(password, salt, iterations), StoredKey = SHA-256(HMAC(
 * SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key"). Given to
 * `CREATE ROLE … PASSWORD` / `ALTER ROLE … PASSWORD`, a string in this format is stored as it is
 * (PostgreSQL, "CREATE ROLE"), so the password itself never reaches the server, its logs or its
 * statistics.
 *
 * PostgreSQL prepares the password with SASLprep before hashing, except an ASCII password, which
 * it uses as it is: only ASCII passwords are accepted here (the generated secrets are), so that
 * the verifier is the one the server would compute. Others throw a `RangeError`.
 */
export function scramSha256Verifier(password: string, options: ScramOptions = {}): string {
  if (password.length === 0) throw new RangeError('SCRAM: the password is empty');
  // biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is what is refused
  if (!/^[\u0001-\u007f]*$/.test(password)) {
    throw new RangeError(
      'SCRAM: the password must be ASCII without NUL (PostgreSQL would SASLprep anything else)',
    );
  }
  const iterations = options.iterations ?? SCRAM_ITERATIONS;
  if (!Number.isSafeInteger(iterations) || iterations < 1) {
    throw new RangeError(`SCRAM: iterations must be a positive integer, got ${iterations}`);
  }
  const salt = options.salt ?? randomBytes(SCRAM_SALT_BYTES);
  if (salt.length === 0) throw new RangeError('SCRAM: the salt is empty');
  const salted = pbkdf2Sync(Buffer.from(password, 'utf8'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}
