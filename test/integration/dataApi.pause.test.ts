import {
  BeginTransactionCommand,
  CommitTransactionCommand,
  ExecuteStatementCommand,
} from '@aws-sdk/client-rds-data';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AURORA_AUTO_PAUSE } from '../../devkit/emulators/dataApiServer.js';
import { waitFor } from '../../devkit/waitFor.js';
import {
  DataApiDatabase,
  DEFAULT_RESUME_WAIT,
  type ResumeEvent,
  type ResumeWait,
} from '../../shared/db/data-api/DataApiDatabase.js';
import { DatabaseResumingError } from '../../shared/index.js';
import { sleep } from '../../shared/util/async.js';
import { localDataApi } from '../helpers/dataApi.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

const ARNS = {
  resourceArn: 'arn:aws:rds:us-east-1:000000000000:cluster:local',
  secretArn: 'arn:aws:secretsmanager:us-east-1:000000000000:secret:local',
};

/**
 * Aurora Serverless v2's automatic pause on the local Data API endpoint, and the adapter's wait
 * for a resume: idle → paused → the next call starts a resume and is refused with the service's
 * `DatabaseResumingException`, as is every call until the resume ends.
 */
describe('the local Data API endpoint pauses when idle, and the adapter waits for its resume', () => {
  let t: TestDatabase;
  let data: Awaited<ReturnType<typeof localDataApi>>;
  const events: ResumeEvent[] = [];
  const wait: ResumeWait = {
    ...DEFAULT_RESUME_WAIT,
    retryBaseMs: 50,
    retryMaxMs: 200,
    onResume: (e) => events.push(e),
  };
  /** A second adapter on the same endpoint without the wait (place-order's). */
  let direct: DataApiDatabase;

  beforeAll(async () => {
    t = await createTestDatabase('data_api_pause', { migrated: false });
    data = await localDataApi(t.url, t.name, {}, { resumeWait: wait });
    direct = new DataApiDatabase({ client: data.client }, { ...ARNS, database: t.name });
  });
  afterEach(() => {
    data.server.setAutoPause(undefined);
    data.db.setDeadline(undefined);
    events.length = 0;
  });
  afterAll(async () => {
    await data?.close();
    await t?.drop();
  });

  let before = { pauses: 0, resumes: 0, refused: 0 };
  /** The counts since the test began (they add up over the file). */
  const counted = () => {
    const now = data.server.pauseStats();
    return {
      state: now.state,
      pauses: now.pauses - before.pauses,
      resumes: now.resumes - before.resumes,
      refused: now.refused - before.refused,
    };
  };
  beforeEach(() => {
    before = data.server.pauseStats();
  });

  const paused = () =>
    waitFor(() => data.server.pauseStats().state === 'paused', {
      timeoutMs: 5_000,
      message: 'the cluster to pause',
    });

  it('pauses after secondsUntilAutoPause without a call; the next call and every call during the resume answer DatabaseResumingException (HTTP 400, the service’s error type and message); then calls succeed', async () => {
    expect(AURORA_AUTO_PAUSE).toMatchObject({
      defaultSecondsUntilAutoPause: 300,
      resumeMs: 15_000,
    });
    data.server.setAutoPause({ secondsUntilAutoPause: 0.5, resumeMs: 600 });
    expect(counted()).toMatchObject({ state: 'active', pauses: 0, resumes: 0 });
    await paused();
    const call = () =>
      fetch(`${data.server.endpoint}/Execute`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...ARNS, sql: 'SELECT 1 AS one' }),
      });
    const first = await call();
    expect(first.status).toBe(400);
    expect(first.headers.get('x-amzn-errortype')).toBe('DatabaseResumingException');
    expect(((await first.json()) as { message: string }).message).toMatch(/resuming/);
    expect(counted()).toMatchObject({ state: 'resuming', pauses: 1, resumes: 1 });
    // the real SDK sees the service's exception, and the adapter without a wait maps it
    await expect(
      data.client.send(new BeginTransactionCommand({ ...ARNS, database: t.name })),
    ).rejects.toMatchObject({ name: 'DatabaseResumingException' });
    await expect(direct.query('SELECT 1')).rejects.toBeInstanceOf(DatabaseResumingError);
    await waitFor(() => data.server.pauseStats().state === 'active', {
      timeoutMs: 5_000,
      message: 'the resume to end',
    });
    expect((await call()).status).toBe(200);
    expect(counted()).toMatchObject({ pauses: 1, resumes: 1, refused: 3 });
  });

  it('an open transaction keeps the cluster awake; it pauses once the transaction ends', async () => {
    data.server.setAutoPause({ secondsUntilAutoPause: 0.2, resumeMs: 100 });
    const client = data.client;
    const { transactionId } = await client.send(
      new BeginTransactionCommand({ ...ARNS, database: t.name }),
    );
    // idle for three pause windows, but with a connection in use (a negative: time must pass)
    await sleep(600);
    expect(data.server.pauseStats().state).toBe('active');
    await client.send(new ExecuteStatementCommand({ ...ARNS, sql: 'SELECT 1', transactionId }));
    await client.send(new CommitTransactionCommand({ ...ARNS, transactionId }));
    await paused();
    expect(counted().pauses).toBe(1);
  });

  it('the adapter with a resume wait: a statement and a transaction begun on a paused cluster wait for the resume and go through, each reported once', async () => {
    // paused now, and not again within the test (300 s idle)
    data.server.setAutoPause({ secondsUntilAutoPause: 300, resumeMs: 800 });
    expect(data.server.pause()).toBe(true);
    const started = Date.now();
    const [q, tx] = await Promise.all([
      data.db.query<{ n: number }>('SELECT 41 + 1 AS n'),
      data.db.transaction(async (x) => (await x.query<{ v: string }>("SELECT 'in tx' AS v")).rows),
    ]);
    expect(q.rows).toEqual([{ n: 42 }]);
    expect(tx).toEqual([{ v: 'in tx' }]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(700);
    expect(events.map((e) => [e.operation, e.resumed]).sort()).toEqual([
      ['BeginTransaction', true],
      ['ExecuteStatement', true],
    ]);
    expect(events.every((e) => e.attempts > 1 && e.waitedMs >= 700)).toBe(true);
    expect(counted()).toMatchObject({ resumes: 1 });
  });

  it('the wait ends before the invocation deadline less its margin: the DatabaseResumingError then, reported as not resumed', async () => {
    data.server.setAutoPause({ secondsUntilAutoPause: 300, resumeMs: 10_000 });
    expect(data.server.pause()).toBe(true);
    data.db.setDeadline(Date.now() + wait.deadlineMarginMs + 700);
    await expect(data.db.query('SELECT 1')).rejects.toBeInstanceOf(DatabaseResumingError);
    // given up while the 10 s resume still runs
    expect(counted()).toMatchObject({ state: 'resuming', resumes: 1 });
    expect(events).toMatchObject([{ operation: 'ExecuteStatement', resumed: false }]);
  });

  it('pause() pauses at once while a transaction is open: its calls still run, a new one waits for the resume', async () => {
    data.server.setAutoPause({ secondsUntilAutoPause: 300, resumeMs: 300 });
    const result = await data.db.transaction(async (x) => {
      expect(data.server.pause()).toBe(true);
      expect(data.server.pauseStats().state).toBe('paused');
      const inside = await x.query<{ n: number }>('SELECT 1 AS n');
      // outside the transaction: refused, waited for
      const outside = await data.db.query<{ n: number }>('SELECT 2 AS n');
      return [inside.rows[0]?.n, outside.rows[0]?.n];
    });
    expect(result).toEqual([1, 2]);
    expect(counted()).toMatchObject({ pauses: 1, resumes: 1 });
    expect(events).toMatchObject([{ operation: 'ExecuteStatement', resumed: true }]);
  });
});
