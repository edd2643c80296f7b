import { networkInterfaces } from 'node:os';
import {
  BeginTransactionCommand,
  CommitTransactionCommand,
  ExecuteStatementCommand,
  RDSDataClient,
} from '@aws-sdk/client-rds-data';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DATA_API_LIMITS,
  type DataApiServer,
  startDataApiServer,
} from '../../devkit/emulators/dataApiServer.js';
import { ensureLocalSqs } from '../../devkit/emulators/sqsServer.js';
import { freePort } from '../../devkit/freePort.js';
import { waitFor } from '../../devkit/waitFor.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

/** A non-loopback IPv4 address of this machine, if it has one. */
const externalAddress = Object.values(networkInterfaces())
  .flat()
  .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;

/** True when a TCP connection to host:port is accepted (an HTTP request gets any answer). */
async function reachable(host: string, port: number): Promise<boolean> {
  return fetch(`http://${host}:${port}/`, { signal: AbortSignal.timeout(2_000) }).then(
    () => true,
    () => false,
  );
}

const ARNS = {
  resourceArn: 'arn:aws:rds:us-east-1:000000000000:cluster:local',
  secretArn: 'arn:aws:secretsmanager:us-east-1:000000000000:secret:local',
};

describe('the local Data API endpoint', () => {
  let t: TestDatabase;
  let server: DataApiServer;
  let client: RDSDataClient;
  beforeAll(async () => {
    t = await createTestDatabase('data_api_endpoint', { migrated: false });
    await t.db.query(
      "CREATE TABLE cells (id int PRIMARY KEY, v text); INSERT INTO cells VALUES (1, 'a')",
    );
    server = await startDataApiServer({
      databaseUrl: t.url,
      transactionIdleTimeoutMs: 300,
      maxRequestBytes: 64 * 1024,
    });
    client = new RDSDataClient({
      endpoint: server.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      maxAttempts: 1,
    });
  });
  afterAll(async () => {
    client?.destroy();
    await server?.close();
    await t?.drop();
  });

  it('listens on 127.0.0.1 only', async () => {
    expect(server.address.address).toBe('127.0.0.1');
    expect(await reachable('127.0.0.1', server.address.port)).toBe(true);
    if (externalAddress) expect(await reachable(externalAddress, server.address.port)).toBe(false);
  });

  it('accepts JSON only: 415 for another content type', async () => {
    const res = await fetch(`${server.endpoint}/Execute`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: JSON.stringify({ ...ARNS, sql: 'SELECT 1' }),
    });
    expect(res.status).toBe(415);
    expect(res.headers.get('x-amzn-errortype')).toBe('UnsupportedMediaTypeException');
    const none = await fetch(`${server.endpoint}/Execute`, { method: 'POST', body: 'x' });
    expect(none.status).toBe(415);
  });

  it('refuses a body over the limit with 413 (the service: 4 MiB)', async () => {
    expect(DATA_API_LIMITS.maxRequestBytes).toBe(4 * 1024 * 1024);
    const sql = `SELECT '${'x'.repeat(64 * 1024)}'`;
    const res = await fetch(`${server.endpoint}/Execute`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...ARNS, sql }),
    });
    expect(res.status).toBe(413);
    // and below the limit the same endpoint answers
    const ok = await client.send(new ExecuteStatementCommand({ ...ARNS, sql: "SELECT 'x' AS v" }));
    expect(ok.records?.[0]?.[0]?.stringValue).toBe('x');
  });

  it('rolls back an abandoned transaction after its idle expiry: its row locks are released', async () => {
    expect(DATA_API_LIMITS.transactionIdleTimeoutMs).toBe(180_000);
    const { transactionId } = await client.send(new BeginTransactionCommand(ARNS));
    await client.send(
      new ExecuteStatementCommand({
        ...ARNS,
        transactionId,
        sql: "UPDATE cells SET v = 'abandoned' WHERE id = 1",
      }),
    );
    // abandoned: no commit, no rollback. Another session gets the row once the expiry rolled it back.
    const locked = await t.db.query<{ v: string }>(
      'SELECT v FROM cells WHERE id = 1 FOR UPDATE SKIP LOCKED',
    );
    expect(locked.rowCount).toBe(0); // held by the abandoned transaction
    const row = await waitFor(
      async () =>
        (await t.db.query<{ v: string }>('SELECT v FROM cells WHERE id = 1 FOR UPDATE SKIP LOCKED'))
          .rows[0],
      { timeoutMs: 10_000, message: 'the abandoned transaction to release its lock' },
    );
    expect(row.v).toBe('a'); // rolled back, not committed
    expect(server.openTransactions()).toBe(0);
    await expect(
      client.send(new ExecuteStatementCommand({ ...ARNS, transactionId, sql: 'SELECT 1' })),
    ).rejects.toMatchObject({ name: 'TransactionNotFoundException' });
  });

  it('ends an abandoned transaction whose session the database terminated at once, giving its connection back (not at the 3-minute expiry)', async () => {
    // the service's idle expiry: only the database's own bound can end it sooner
    const own = await startDataApiServer({ databaseUrl: t.url });
    const c = new RDSDataClient({
      endpoint: own.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      maxAttempts: 1,
    });
    try {
      const { transactionId } = await c.send(new BeginTransactionCommand(ARNS));
      await c.send(
        new ExecuteStatementCommand({
          ...ARNS,
          transactionId,
          sql: "SELECT set_config('idle_in_transaction_session_timeout', '200ms', true)",
        }),
      );
      // abandoned (its caller killed): PostgreSQL ends the session after 200 ms idle
      expect(own.openTransactions()).toBe(1);
      await waitFor(async () => own.openTransactions() === 0, {
        timeoutMs: 10_000,
        message: 'the terminated transaction to end',
      });
      // its connection is back: more calls than the pool holds connections go through
      for (let i = 0; i < 12; i++) {
        const { transactionId: id } = await c.send(new BeginTransactionCommand(ARNS));
        await c.send(
          new ExecuteStatementCommand({
            ...ARNS,
            transactionId: id,
            sql: "SELECT set_config('idle_in_transaction_session_timeout', '100ms', true)",
          }),
        );
      }
      await waitFor(async () => own.openTransactions() === 0, {
        timeoutMs: 10_000,
        message: 'every terminated transaction to end',
      });
      await expect(
        c.send(new ExecuteStatementCommand({ ...ARNS, sql: 'SELECT 1 AS one' })),
      ).resolves.toMatchObject({ records: [[{ longValue: 1 }]] });
    } finally {
      c.destroy();
      await own.close();
    }
  });

  it('answers DatabaseResumingException (HTTP 400) while switched to resuming', async () => {
    server.setResuming(true);
    try {
      const res = await fetch(`${server.endpoint}/Execute`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...ARNS, sql: 'SELECT 1' }),
      });
      expect(res.status).toBe(400);
      await expect(
        client.send(new ExecuteStatementCommand({ ...ARNS, sql: 'SELECT 1' })),
      ).rejects.toMatchObject({ name: 'DatabaseResumingException' });
    } finally {
      server.setResuming(false);
    }
    await expect(
      client.send(new ExecuteStatementCommand({ ...ARNS, sql: 'SELECT 1' })),
    ).resolves.toBeDefined();
  });

  it('serves each call on the database its `database` names, as a cluster serves its databases: a mapped name on its URL, another that database of the server; one that does not exist fails', async () => {
    const other = await createTestDatabase('data_api_other_db', { migrated: false });
    await other.db.query(
      "CREATE TABLE cells (id int PRIMARY KEY, v text); INSERT INTO cells VALUES (1, 'other')",
    );
    const routed = await startDataApiServer({
      databaseUrl: t.url,
      databases: { deployed_name: other.url },
    });
    const c = new RDSDataClient({
      endpoint: routed.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      maxAttempts: 1,
    });
    try {
      const mine = (await t.db.query<{ v: string }>('SELECT v FROM cells WHERE id = 1')).rows[0]?.v;
      const v = async (database?: string, transactionId?: string) =>
        (
          await c.send(
            new ExecuteStatementCommand({
              ...ARNS,
              ...(database ? { database } : {}),
              ...(transactionId ? { transactionId } : {}),
              sql: 'SELECT v FROM cells WHERE id = 1',
            }),
          )
        ).records?.[0]?.[0]?.stringValue;
      expect(await v()).toBe(mine);
      expect(await v(t.name)).toBe(mine);
      expect(await v('deployed_name')).toBe('other');
      expect(await v(other.name)).toBe('other');
      await expect(v(`${t.name}_missing`)).rejects.toMatchObject({
        name: 'DatabaseErrorException',
      });
      // a transaction runs in the database it was begun in
      const { transactionId } = await c.send(
        new BeginTransactionCommand({ ...ARNS, database: 'deployed_name' }),
      );
      expect(await v(undefined, transactionId)).toBe('other');
      await c.send(new CommitTransactionCommand({ ...ARNS, transactionId }));
    } finally {
      c.destroy();
      await routed.close();
      await other.drop();
    }
  });
});

describe('the embedded SQS server', () => {
  it('listens on 127.0.0.1 only', async () => {
    const sqs = await ensureLocalSqs({ port: await freePort() });
    try {
      expect(sqs.embedded).toBe(true);
      const port = Number(new URL(sqs.endpoint).port);
      expect(port).toBeGreaterThan(0);
      expect(await reachable('127.0.0.1', port)).toBe(true);
      expect(externalAddress, 'this machine has a non-loopback IPv4 address').toBeDefined();
      expect(await reachable(externalAddress as string, port)).toBe(false);
    } finally {
      await sqs.stop();
    }
  });
});
