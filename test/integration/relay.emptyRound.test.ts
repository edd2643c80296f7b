import { randomUUID } from 'node:crypto';
import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callLog, startCountingProxy } from '../../devkit/emulators/countingProxy.js';
import { startDataApiServer } from '../../devkit/emulators/dataApiServer.js';
import { DataApiDatabase } from '../../shared/db/data-api/DataApiDatabase.js';
import type { Publisher } from '../../shared/index.js';
import { newEnvelope, OutboxRelay, OutboxStore } from '../../shared/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

/**
 * What a relay round costs on the Data API (docs/performance.md, "Cost per million orders"): a
 * lingering or ticking relay mostly finds nothing, and each empty round used to cost a broker
 * readiness call and a transaction (three Data API calls). Counted on the wire, through the
 * same counting proxy the cost benchmark uses.
 */
describe('an empty relay round costs one Data API call and no broker call', () => {
  let t: TestDatabase;
  let close: () => Promise<void>;
  const calls = callLog();
  let db: DataApiDatabase;
  let readyCalls = 0;
  const publisher: Publisher = {
    async ready() {
      readyCalls++;
    },
    async publish(envelopes) {
      return envelopes.map((e) => ({ id: e.id, ok: true as const }));
    },
    async close() {},
  };

  beforeAll(async () => {
    t = await createTestDatabase('relay_empty_round');
    const server = await startDataApiServer({ databaseUrl: t.url });
    const proxy = await startCountingProxy(server.endpoint, 'rds-data', calls);
    const client = new RDSDataClient({
      endpoint: proxy.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      maxAttempts: 1,
    });
    db = new DataApiDatabase(
      { client },
      {
        resourceArn: 'arn:aws:rds:us-east-1:000000000000:cluster:local',
        secretArn: 'arn:aws:secretsmanager:us-east-1:000000000000:secret:local',
        database: t.name,
      },
    );
    close = async () => {
      client.destroy();
      await proxy.close();
      await server.close();
    };
  });
  afterAll(async () => {
    await close?.();
    await t?.drop();
  });

  const relay = () =>
    new OutboxRelay({ db, publisher }, { table: 'outbox', batchSize: 10, maxAttempts: 3 });

  it('nothing due: one ExecuteStatement, no transaction, no readiness check', async () => {
    calls.reset();
    readyCalls = 0;
    expect(await relay().runOnce()).toMatchObject({ claimed: 0, published: 0 });
    expect(calls.counts()).toEqual({ 'rds-data:Execute': 1 });
    expect(readyCalls).toBe(0);
  });

  it('a row due: the readiness check, then the claim in a transaction', async () => {
    const orderId = randomUUID();
    await t.db.transaction((tx) =>
      new OutboxStore('outbox').append(
        tx,
        newEnvelope({
          type: 'order.created',
          aggregate: { type: 'order', id: orderId, version: 1 },
          data: { orderId, sku: 'SKU-E', quantity: 1 },
          correlationId: 'empty-round',
          producer: 'order-service',
        }),
      ),
    );
    calls.reset();
    readyCalls = 0;
    expect(await relay().runOnce()).toMatchObject({ claimed: 1, published: 1 });
    expect(readyCalls).toBe(1);
    const counts = calls.counts();
    expect(counts['rds-data:BeginTransaction']).toBe(1);
    expect(counts['rds-data:CommitTransaction']).toBe(1);
  });
});
