import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { localLambdaContext } from '../../devkit/triggers/lambdaContext.js';
import { createMigrateHandler } from '../../functions/migrate/handler.js';
import { APP_GROUP_ROLE, DB_ROLES, DB_SIDES } from '../../shared/db/appRole.js';
import { migrationsLambdaHandler } from '../../shared/db/data-api/DataApiDatabase.js';
import { libraryMigrations } from '../../shared/db/libraryMigrations.js';
import { loadMigrations } from '../../shared/db/migrate.js';
import { createLogger } from '../../shared/logger.js';
import { localDataApi } from '../helpers/dataApi.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { uniqueName } from '../helpers/services.js';

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

describe('migrations on deploy through the RDS Data API (custom resource handler)', () => {
  let t: TestDatabase;
  let api: Awaited<ReturnType<typeof localDataApi>>;
  let handler: ReturnType<typeof createMigrateHandler>;
  beforeAll(async () => {
    t = await createTestDatabase('data_api_migrate', { migrated: false });
    api = await localDataApi(t.url, t.name);
    handler = createMigrateHandler({ db: api.db, logger: createLogger('migrate-test') });
  });
  afterAll(async () => {
    await api?.close();
    await t?.drop();
  });

  it('Create applies every migration statement by statement; Update is a no-op; Delete keeps the data', async () => {
    const all = await loadMigrations();
    const created = await handler(event('Create'), localLambdaContext('migrate'));
    expect(created).toEqual({
      PhysicalResourceId: 'schema-migrations',
      Data: { applied: all.length, skipped: 0, appUser: '', logins: '' },
    });
    const { rows } = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public'
          AND table_name IN ('orders', 'outbox', 'stock', 'reservations', 'processed_messages', 'inventory_outbox', 'schema_migrations')`,
    );
    expect(rows[0]?.n).toBe(7);
    expect(await handler(event('Update'), localLambdaContext('migrate'))).toMatchObject({
      Data: { applied: 0, skipped: all.length },
    });
    expect(await handler(event('Delete'), localLambdaContext('migrate'))).toMatchObject({
      Data: { applied: 0 },
    });
  });

  it("deployed (the sides' secrets, the legacy one), migrate makes each login a member of its group role", async () => {
    const base = uniqueName('migrate_app');
    const users = DB_SIDES.map((side) => `${base}_${side}`);
    const withLogins = createMigrateHandler({
      db: api.db,
      logger: createLogger('migrate-test'),
      serviceLogins: async () =>
        Object.fromEntries(
          DB_SIDES.map((side, i) => [side, { username: users[i], password: 'generated-Pa55word' }]),
        ),
      appLogin: async () => ({ username: `${base}_legacy`, password: 'generated-Pa55word' }),
    });
    try {
      expect(await withLogins(event('Update'), localLambdaContext('migrate'))).toMatchObject({
        Data: { applied: 0, appUser: `${base}_legacy`, logins: users.join(',') },
      });
      const { rows } = await t.db.query<{ member: boolean }>(
        `SELECT pg_has_role(u, g, 'MEMBER') AS member
           FROM jsonb_to_recordset($1::jsonb) AS x(u text, g text)`,
        [
          JSON.stringify([
            ...DB_SIDES.map((side, i) => ({ u: users[i], g: DB_ROLES[side].group })),
            { u: `${base}_legacy`, g: APP_GROUP_ROLE },
          ]),
        ],
      );
      expect(rows.map((r) => r.member)).toEqual([true, true, true, true, true]);
      // the legacy login retired (`-c legacyAppLogin=false`): no login, no group
      const retiring = createMigrateHandler({
        db: api.db,
        logger: createLogger('migrate-test'),
        retiredLogin: `${base}_legacy`,
      });
      expect(await retiring(event('Update'), localLambdaContext('migrate'))).toMatchObject({
        Data: { applied: 0, appUser: '' },
      });
      const { rows: retired } = await t.db.query<{ login: boolean; member: boolean }>(
        `SELECT rolcanlogin AS login, pg_has_role(rolname, $2::text, 'MEMBER') AS member
           FROM pg_roles WHERE rolname = $1::text`,
        [`${base}_legacy`, APP_GROUP_ROLE],
      );
      expect(retired).toEqual([{ login: false, member: false }]);
    } finally {
      for (const user of [...users, `${base}_legacy`]) {
        await t.db.query(`DROP ROLE IF EXISTS ${user}`);
      }
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
