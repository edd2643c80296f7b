import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localLambdaContext } from '../../devkit/triggers/lambdaContext.js';
import { createMigrateHandler } from '../../functions/migrate/handler.js';
import { APP_GROUP_ROLE, DB_ROLES, DB_SIDES } from '../../shared/db/appRole.js';
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
