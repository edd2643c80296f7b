import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { withDatabase } from '../../devkit/scratch.js';
import { localLambdaContext } from '../../devkit/triggers/lambdaContext.js';
import { createMigrateHandler } from '../../functions/migrate/handler.js';
import {
  DataApiDatabase,
  migrationsLambdaHandler,
} from '../../shared/db/data-api/DataApiDatabase.js';
import type { SqlExecutor } from '../../shared/index.js';
import { createLogger, libraryMigrations } from '../../shared/index.js';
import { DB_ROLES, DB_SIDES } from '../../shared/pipeline/appRole.js';
import { ensureDatabase, serviceMigrations } from '../../shared/pipeline/schema.js';
import { localDataApi } from '../helpers/dataApi.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { DATABASE_URL, uniqueName } from '../helpers/services.js';

/** Runs `fn` on the test server's `postgres` database (databases are created and dropped there). */
async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: withDatabase(DATABASE_URL, 'postgres') });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

const event = (RequestType: 'Create' | 'Update' | 'Delete') =>
  ({
    RequestType,
    ServiceToken: 'arn:aws:lambda:local:000000000000:function:provider',
    ResponseURL: 'http://localhost/unused',
    StackId: 'arn:aws:cloudformation:local:000000000000:stack/data/1',
    RequestId: '1',
    LogicalResourceId: 'Migrations',
    ResourceType: 'Custom::Migrations',
    ResourceProperties: { ServiceToken: 'x' },
    ...(RequestType === 'Create'
      ? {}
      : { PhysicalResourceId: 'schema-migrations', OldResourceProperties: {} }),
  }) as CloudFormationCustomResourceEvent;

describe("migrations on deploy through the RDS Data API (custom resource handler): each service's database of the cluster", () => {
  let t: TestDatabase;
  let api: Awaited<ReturnType<typeof localDataApi>>;
  let inventoryName: string;
  let handler: ReturnType<typeof createMigrateHandler>;
  /** The inventory database through the same endpoint and secret (the cluster's other database). */
  const inventoryDb = (name: string) =>
    new DataApiDatabase(
      { client: api.client },
      {
        resourceArn: 'arn:aws:rds:us-east-1:000000000000:cluster:local',
        secretArn: 'arn:aws:secretsmanager:us-east-1:000000000000:secret:local',
        database: name,
      },
    );
  const dropDatabase = (name: string) =>
    admin((c) => c.query(`DROP DATABASE IF EXISTS "${name.replace(/"/g, '""')}" WITH (FORCE)`));

  beforeAll(async () => {
    t = await createTestDatabase('data_api_migrate', { migrated: false });
    inventoryName = `${t.name}_inventory`;
    api = await localDataApi(t.url, t.name);
    handler = createMigrateHandler({
      ordersDb: api.db,
      inventory: { name: inventoryName, db: inventoryDb(inventoryName) },
      logger: createLogger('migrate-test'),
    });
  });
  afterAll(async () => {
    await api?.close();
    if (inventoryName) await dropDatabase(inventoryName);
    await t?.drop();
  });

  it("Create creates the inventory database and applies each service's migrations to its own, statement by statement; Update is a no-op; Delete keeps the data", async () => {
    const orders = await serviceMigrations('orders');
    const inventory = await serviceMigrations('inventory');
    const created = await handler(event('Create'), localLambdaContext('migrate'));
    expect(created).toEqual({
      PhysicalResourceId: 'schema-migrations',
      Data: {
        ordersApplied: orders.length,
        ordersSkipped: 0,
        inventoryApplied: inventory.length,
        inventorySkipped: 0,
        inventoryCreated: true,
        logins: '',
      },
    });
    const tablesOf = async (db: SqlExecutor) =>
      (
        await db.query<{ t: string }>(
          `SELECT table_name::text AS t FROM information_schema.tables
            WHERE table_schema = 'public' ORDER BY 1`,
        )
      ).rows.map((r) => r.t);
    expect(await tablesOf(t.db)).toEqual([
      'order_results_set_aside',
      'orders',
      'outbox',
      'processed_messages',
      'schema_migrations',
    ]);
    expect(await tablesOf(inventoryDb(inventoryName))).toEqual([
      'inventory_outbox',
      'processed_messages',
      'reservations',
      'schema_migrations',
      'stock',
    ]);
    expect(await handler(event('Update'), localLambdaContext('migrate'))).toMatchObject({
      Data: {
        ordersApplied: 0,
        ordersSkipped: orders.length,
        inventoryApplied: 0,
        inventorySkipped: inventory.length,
        inventoryCreated: false,
      },
    });
    expect(await handler(event('Delete'), localLambdaContext('migrate'))).toMatchObject({
      Data: { ordersApplied: 0, inventoryApplied: 0 },
    });
    expect(await tablesOf(inventoryDb(inventoryName))).toContain('stock');
  });

  it("deployed (the sides' secrets), migrate makes each login a member of its group role, once for both databases", async () => {
    const base = uniqueName('migrate_app');
    const users = DB_SIDES.map((side) => `${base}_${side}`);
    const withLogins = createMigrateHandler({
      ordersDb: api.db,
      inventory: { name: inventoryName, db: inventoryDb(inventoryName) },
      logger: createLogger('migrate-test'),
      serviceLogins: async () =>
        Object.fromEntries(
          DB_SIDES.map((side, i) => [side, { username: users[i], password: 'generated-Pa55word' }]),
        ),
    });
    try {
      expect(await withLogins(event('Update'), localLambdaContext('migrate'))).toMatchObject({
        Data: { ordersApplied: 0, inventoryApplied: 0, logins: users.join(',') },
      });
      const { rows } = await t.db.query<{ member: boolean }>(
        `SELECT pg_has_role(u, g, 'MEMBER') AS member
           FROM jsonb_to_recordset($1::jsonb) AS x(u text, g text)`,
        [JSON.stringify(DB_SIDES.map((side, i) => ({ u: users[i], g: DB_ROLES[side].group })))],
      );
      expect(rows.map((r) => r.member)).toEqual([true, true, true, true]);
    } finally {
      for (const user of users) await t.db.query(`DROP ROLE IF EXISTS ${user}`);
    }
  });

  it('refuses a database of the single-database layout before creating anything', async () => {
    const old = await createTestDatabase('data_api_migrate_old', { migrated: false });
    const oldApi = await localDataApi(old.url, old.name);
    const oldInventory = `${old.name}_inventory`;
    try {
      await old.db.query('CREATE TABLE schema_migrations (name text PRIMARY KEY)');
      await old.db.query("INSERT INTO schema_migrations VALUES ('0001_orders_and_outbox')");
      const refusing = createMigrateHandler({
        ordersDb: oldApi.db,
        inventory: { name: oldInventory, db: inventoryDb(oldInventory) },
        logger: createLogger('migrate-test'),
      });
      await expect(refusing(event('Update'), localLambdaContext('migrate'))).rejects.toThrow(
        /single-database layout/,
      );
      const { rows } = await t.db.query('SELECT 1 FROM pg_database WHERE datname = $1', [
        oldInventory,
      ]);
      expect(rows).toEqual([]);
    } finally {
      await oldApi.close();
      await dropDatabase(oldInventory);
      await old.drop();
    }
  });

  it('ensureDatabase quotes the name (the server builds the statement) and leaves an existing database alone', async () => {
    const odd = `${t.name}_Odd "name"`;
    try {
      expect(await ensureDatabase(t.db, odd)).toBe(true);
      expect(await ensureDatabase(t.db, odd)).toBe(false);
      const { rows } = await t.db.query('SELECT 1 FROM pg_database WHERE datname = $1', [odd]);
      expect(rows).toHaveLength(1);
      await expect(ensureDatabase(t.db, 'x'.repeat(64))).rejects.toThrow(/1 to 63 bytes/);
    } finally {
      await dropDatabase(odd);
    }
  });
});

const moto = inject('services').sqs.find((s) => s.name === 'moto');

describe.skipIf(!moto)(
  "a service of your own: migrationsLambdaHandler applies the library's tables and yours, then your logins from their secrets",
  () => {
    let t: TestDatabase;
    let api: Awaited<ReturnType<typeof localDataApi>>;
    let secrets: SecretsManagerClient;
    const group = uniqueName('ship_rw');
    const user = uniqueName('ship_fn');
    const password = 'generated-Pa55word-for-shipping';
    const own = [
      {
        name: '0001_shipments',
        checksum: '1',
        sql: `CREATE TABLE shipments (order_id uuid PRIMARY KEY);
              CREATE ROLE ${group} NOLOGIN;
              GRANT SELECT, INSERT ON shipments, processed_messages, shipping_outbox TO ${group};`,
      },
    ];
    beforeAll(async () => {
      t = await createTestDatabase('migrations_handler', { migrated: false });
      api = await localDataApi(t.url, t.name);
      secrets = new SecretsManagerClient({
        endpoint: moto?.endpoint,
        region: 'us-east-1',
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      });
    });
    afterAll(async () => {
      await api?.close();
      await t?.db.query(`DROP OWNED BY ${group}`).catch(() => {});
      await t?.drop();
      // roles outlive the database: the login is dropped by the test, the group here
      const admin = new pg.Client({ connectionString: t?.url.replace(/\/[^/]*$/, '/postgres') });
      await admin.connect();
      await admin.query(`DROP ROLE IF EXISTS ${group}`).finally(() => admin.end());
      secrets?.destroy();
    });

    it('Create applies them and creates the login in its group; the login connects; Update is a no-op', async () => {
      const { ARN } = await secrets.send(
        new CreateSecretCommand({
          Name: uniqueName('ship-login'),
          SecretString: JSON.stringify({ username: user, password }),
        }),
      );
      const migrations = [...libraryMigrations({ outboxes: ['shipping_outbox'] }), ...own];
      const handler = migrationsLambdaHandler({
        db: api.db,
        migrations: () => migrations,
        loginSecrets: { [group]: ARN as string },
        secrets,
        logger: createLogger('migrations-test'),
      });
      expect(await handler(event('Create'), localLambdaContext('migrate'))).toEqual({
        PhysicalResourceId: 'schema-migrations',
        Data: { applied: migrations.length, skipped: 0, logins: user },
      });
      const { rows } = await t.db.query<{ member: boolean }>(
        "SELECT pg_has_role($1::text, $2::text, 'MEMBER') AS member",
        [user, group],
      );
      expect(rows[0]?.member).toBe(true);
      // the login reaches what its group was granted, and nothing else
      const url = new URL(t.url);
      url.username = user;
      url.password = password;
      const login = new pg.Client({ connectionString: url.toString() });
      await login.connect();
      try {
        await login.query('INSERT INTO shipments (order_id) VALUES (gen_random_uuid())');
        await expect(login.query('DELETE FROM shipments')).rejects.toThrow(/permission denied/);
      } finally {
        await login.end();
      }
      expect(await handler(event('Update'), localLambdaContext('migrate'))).toMatchObject({
        Data: { applied: 0, skipped: migrations.length, logins: user },
      });
      expect(await handler(event('Delete'), localLambdaContext('migrate'))).toMatchObject({
        Data: { applied: 0, logins: '' },
      });
      await t.db.query(`DROP ROLE ${user}`);
    });
  },
);
