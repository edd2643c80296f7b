import { RDSDataClient } from '@aws-sdk/client-rds-data';
import { afterAll, beforeAll } from 'vitest';
import { DataApiDatabase } from '../../shared/db/data-api/DataApiDatabase.js';
import { type DataApiServer, startDataApiServer } from '../../shared/local/dataApiServer.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { runSqlContract } from './sql.contract.js';

let t: TestDatabase;
let server: DataApiServer;
let db: DataApiDatabase;
let client: RDSDataClient;
beforeAll(async () => {
  t = await createTestDatabase('sql_contract_data_api');
  server = await startDataApiServer({ databaseUrl: t.url });
  // the real SDK client, over HTTP, against the local endpoint
  client = new RDSDataClient({
    endpoint: server.endpoint,
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
});
afterAll(async () => {
  client?.destroy();
  await server?.close();
  await t?.drop();
});

runSqlContract({ name: 'RDS Data API (local endpoint, real SDK client)', db: () => db });
