import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type AcquireLockOptions,
  AcquireLockTimeoutError,
  type MessageDeduplicationStore,
  type ReleasableLock,
} from '@message-queue-toolkit/core';
import { createClient } from '@redis/client';

type LockResult = Awaited<ReturnType<MessageDeduplicationStore['acquireLock']>>;
const newClient = (url: string) => createClient({ url });

// redis-semaphore's Mutex scripts: refresh and release only while the lock is still ours
const EXPIRE_IF_OWNER = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0`;
const DELETE_IF_OWNER = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1]) end return 0`;
/** redis-semaphore's default pause between lock attempts. */
const RETRY_INTERVAL_MS = 10;

/**
 * `RedisMessageDeduplicationStore` of `@message-queue-toolkit/redis-message-deduplication-store`
 * (which cannot be installed here: it needs `@lokalise/node-core` ^14.9.1, missing from this
 * machine's registry), rewritten over `@redis/client` with the same semantics:
 * `setIfNotExists` = `SET key value EX ttl NX`, `keyExists` = `EXISTS`, and `acquireLock` =
 * redis-semaphore's `Mutex` (`SET mutex:key id PX lockTimeout NX` every 10 ms until
 * `acquireTimeout`, then `AcquireLockTimeoutError`; refreshed every `refreshInterval` while held;
 * released only by its owner). Every key is prefixed with the peer's namespace.
 */
export class RedisDeduplicationStore implements MessageDeduplicationStore {
  private constructor(
    private readonly redis: ReturnType<typeof newClient>,
    private readonly prefix: string,
  ) {}

  static async connect(url: string, prefix: string): Promise<RedisDeduplicationStore> {
    const redis = newClient(url);
    redis.on('error', () => {}); // the client reconnects by itself; commands fail meanwhile
    await redis.connect();
    return new RedisDeduplicationStore(redis, prefix);
  }

  async setIfNotExists(key: string, value: string, ttlSeconds: number): Promise<boolean> {
    const reply = await this.redis.set(this.prefix + key, value, {
      condition: 'NX',
      expiration: { type: 'EX', value: ttlSeconds },
    });
    return reply === 'OK';
  }

  async keyExists(key: string): Promise<boolean> {
    return (await this.redis.exists(this.prefix + key)) === 1;
  }

  async acquireLock(key: string, options: object): Promise<LockResult> {
    const { acquireTimeoutSeconds, lockTimeoutSeconds, refreshIntervalSeconds } =
      options as AcquireLockOptions;
    const lockKey = `${this.prefix}mutex:${key}`;
    const id = randomUUID();
    const lockMs = String(lockTimeoutSeconds * 1000);
    const deadline = Date.now() + acquireTimeoutSeconds * 1000;
    try {
      while (
        (await this.redis.set(lockKey, id, {
          condition: 'NX',
          expiration: { type: 'PX', value: lockTimeoutSeconds * 1000 },
        })) !== 'OK'
      ) {
        if (Date.now() >= deadline) {
          return { error: new AcquireLockTimeoutError(`Acquire mutex ${lockKey} timeout`) };
        }
        await sleep(RETRY_INTERVAL_MS);
      }
    } catch (err) {
      return { error: err as Error };
    }
    const refresh = setInterval(() => {
      this.redis
        .eval(EXPIRE_IF_OWNER, { keys: [lockKey], arguments: [id, lockMs] })
        .then((kept) => kept === 1 || clearInterval(refresh)) // lost: stop refreshing
        .catch(() => clearInterval(refresh));
    }, refreshIntervalSeconds * 1000);
    refresh.unref();
    const lock: ReleasableLock = {
      release: async () => {
        clearInterval(refresh);
        await this.redis.eval(DELETE_IF_OWNER, { keys: [lockKey], arguments: [id] });
      },
    };
    return { result: lock };
  }

  async close(): Promise<void> {
    await this.redis.close();
  }
}
