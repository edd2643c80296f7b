import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SCRAM_ITERATIONS, scramSha256Verifier } from '../../shared/db/scram.js';

/**
 * The SCRAM-SHA-256 verifier against the exchange of RFC 7677 §3 (user "user", password "pencil"):
 * a server holding only the verifier's StoredKey and ServerKey accepts the RFC's client proof and
 * answers the RFC's server signature, as RFC 5802 §3 has it.
 */
describe('scramSha256Verifier', () => {
  const salt = Buffer.from('W22ZaJ0SNY7soEsUEjb6gQ==', 'base64');
  const clientFirstBare = 'n=user,r=rOprNGfwEbeRWgbNEkqO';
  const serverFirst =
    'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096';
  const clientFinalWithoutProof = 'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0';
  const proof = Buffer.from('dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=', 'base64');
  const serverSignature = '6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=';
  const authMessage = `${clientFirstBare},${serverFirst},${clientFinalWithoutProof}`;

  it('RFC 7677: the stored keys verify the RFC client proof and give the RFC server signature', () => {
    const verifier = scramSha256Verifier('pencil', { salt, iterations: 4096 });
    const m = /^SCRAM-SHA-256\$4096:W22ZaJ0SNY7soEsUEjb6gQ==\$([^:]+):(.+)$/.exec(verifier);
    expect(m, verifier).not.toBeNull();
    const storedKey = Buffer.from(m?.[1] ?? '', 'base64');
    const serverKey = Buffer.from(m?.[2] ?? '', 'base64');
    // the server's check: H(ClientProof XOR HMAC(StoredKey, AuthMessage)) == StoredKey
    const clientSignature = createHmac('sha256', storedKey).update(authMessage).digest();
    const clientKey = Buffer.from(proof.map((b, i) => b ^ (clientSignature[i] as number)));
    expect(createHash('sha256').update(clientKey).digest().equals(storedKey)).toBe(true);
    expect(createHmac('sha256', serverKey).update(authMessage).digest('base64')).toBe(
      serverSignature,
    );
  });

  it('a wrong password gives keys that refuse the RFC proof', () => {
    const m = /\$([^:$]+):([^$]+)$/.exec(
      scramSha256Verifier('pencils', { salt, iterations: 4096 }),
    );
    const serverKey = Buffer.from(m?.[2] ?? '', 'base64');
    expect(createHmac('sha256', serverKey).update(authMessage).digest('base64')).not.toBe(
      serverSignature,
    );
  });

  it("PostgreSQL's format: default 4096 iterations, 16 random bytes of salt, never the password", () => {
    const a = scramSha256Verifier('generated-Pa55word');
    const b = scramSha256Verifier('generated-Pa55word');
    expect(SCRAM_ITERATIONS).toBe(4096);
    expect(a).toMatch(
      /^SCRAM-SHA-256\$4096:[A-Za-z0-9+/]{22}==\$[A-Za-z0-9+/]{43}=:[A-Za-z0-9+/]{43}=$/,
    );
    expect(a).not.toBe(b); // a fresh salt each time
    expect(a).not.toContain('generated-Pa55word');
  });

  it('refuses what PostgreSQL would SASLprep or cannot store: non-ASCII, NUL, empty', () => {
    expect(() => scramSha256Verifier('pässword')).toThrow(/ASCII/);
    expect(() => scramSha256Verifier('a\u0000b')).toThrow(/ASCII/);
    expect(() => scramSha256Verifier('')).toThrow(/empty/);
    expect(() => scramSha256Verifier('x', { iterations: 0 })).toThrow(/iterations/);
  });
});
