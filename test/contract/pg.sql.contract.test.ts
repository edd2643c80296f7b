import { afterAll, beforeAll } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { runSqlContract } from './sql.contract.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase('sql_contract_pg');
});
afterAll(() => t?.drop());

runSqlContract({ name: 'node-postgres', db: () => t.db });
