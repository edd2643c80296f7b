import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localLambdaContext } from '../../devkit/triggers/lambdaContext.js';
import { createMigrateHandler } from '../../functions/migrate/handler.js';
import { APP_GROUP_ROLE } from '../../shared/db/appRole.js';
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
      Data: { applied: all.length, skipped: 0, appUser: '' },
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

  it('deployed (an app secret), migrate also makes the login user a member of the app role', async () => {
    const username = uniqueName('migrate_app');
    const withApp = createMigrateHandler({
      db: api.db,
      logger: createLogger('migrate-test'),
      appLogin: async () => ({ username, password: 'generated-Pa55word' }),
    });
    try {
      expect(await withApp(event('Update'), localLambdaContext('migrate'))).toMatchObject({
        Data: { applied: 0, appUser: username },
      });
      const { rows } = await t.db.query<{ member: boolean }>(
        `SELECT pg_has_role($1::text, $2::text, 'MEMBER') AS member`,
        [username, APP_GROUP_ROLE],
      );
      expect(rows[0]?.member).toBe(true);
    } finally {
      await t.db.query(`DROP ROLE IF EXISTS ${username}`);
    }
  });
});
