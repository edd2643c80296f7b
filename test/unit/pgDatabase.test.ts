import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';

/**
 * A pooled client terminated at the very moment the pool hands it out (the chaos soak's
 * `pg_terminate_backend` during a reconnect): node-postgres emits 'error' on the client in the
 * same tick as it finishes connecting, and an 'error' event without a listener kills the process.
 */
describe('PgDatabase.transaction when the connection dies as it is checked out', () => {
  let db: PgDatabase | undefined;
  afterEach(async () => {
    await db?.close();
  });

  it('has its error listener on the client before the first error can be emitted', async () => {
    // Prepare: a pool whose client errors synchronously right after being handed out, as pg does
    // when ReadyForQuery and a FATAL 57P01 arrive in one socket read.
    db = new PgDatabase({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
    const terminated = Object.assign(
      new Error('terminating connection due to administrator command'),
      { code: '57P01' },
    );
    const client = Object.assign(new EventEmitter(), {
      dead: false,
      release: vi.fn(),
      query: vi.fn(async function (this: { dead: boolean }) {
        if (client.dead) throw terminated;
        return { rows: [], rowCount: 0 };
      }),
    });
    let listenersAtError = -1;
    const handOut = () => {
      listenersAtError = client.listenerCount('error');
      client.dead = true;
      if (listenersAtError > 0) client.emit('error', terminated); // else: the process would die
    };
    const connect = (cb?: (err: Error | undefined, c: unknown, done: unknown) => void) => {
      if (cb) {
        cb(undefined, client, client.release);
        handOut();
        return undefined;
      }
      return new Promise((resolve) => {
        resolve(client);
        handOut();
      });
    };
    (db.pool as unknown as { connect: typeof connect }).connect = connect;

    // Act
    const result = db.transaction(async (tx) => tx.query('SELECT 1'));

    // Assess: the error was heard, the transaction failed, the dead client left the pool
    await expect(result).rejects.toThrow(/administrator command/);
    expect(listenersAtError).toBeGreaterThan(0);
    expect(client.release).toHaveBeenCalledTimes(1);
    expect(client.release.mock.calls[0]?.[0]).toBeInstanceOf(Error);
    expect(client.listenerCount('error')).toBe(0);
  });

  it('still commits normally', async () => {
    db = new PgDatabase({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
    const client = Object.assign(new EventEmitter(), {
      release: vi.fn(),
      query: vi.fn(async (_sql: string) => ({ rows: [{ ok: 1 }], rowCount: 1 })),
    });
    const connect = (cb?: (e: undefined, c: unknown) => void) =>
      cb ? cb(undefined, client) : Promise.resolve(client);
    (db.pool as unknown as { connect: typeof connect }).connect = connect;
    await expect(db.transaction(async (tx) => (await tx.query('SELECT 1')).rows)).resolves.toEqual([
      { ok: 1 },
    ]);
    expect(client.query.mock.calls.map((c) => c[0])).toEqual(['BEGIN', 'SELECT 1', 'COMMIT']);
    expect(client.release).toHaveBeenCalledWith(undefined);
  });
});
