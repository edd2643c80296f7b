import { afterAll, beforeAll } from 'vitest';
import type { DataApiDatabase } from '../../shared/db/data-api/DataApiDatabase.js';
import { localDataApi } from '../helpers/dataApi.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { runSqlContract } from './sql.contract.js';

let t: TestDatabase;
let api: { db: DataApiDatabase; close(): Promise<void> };
beforeAll(async () => {
  t = await createTestDatabase('sql_contract_data_api');
  api = await localDataApi(t.url, t.name);
});
afterAll(async () => {
  await api?.close();
  await t?.drop();
});

runSqlContract({ name: 'RDS Data API (local endpoint, real SDK client)', db: () => api.db });
