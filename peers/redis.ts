import { createClient } from '@redis/client';

/** Redis for the peers' idempotency and deduplication stores. */
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Why Redis cannot serve the peers (undefined: it answers PING), with what to do about it. */
export async function redisProblem(url: string): Promise<string | undefined> {
  const client = createClient({ url, socket: { connectTimeout: 2_000, reconnectStrategy: false } });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.ping();
    return undefined;
  } catch (err) {
    return `Redis at ${url} does not answer (${(err as Error).message}): the peers' idempotency and deduplication stores need it. Start it (Debian: \`redis-server --daemonize yes\`) or set REDIS_URL.`;
  } finally {
    await client.close().catch(() => {});
  }
}
