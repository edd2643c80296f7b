import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withDatabase } from '../../devkit/scratch.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import { scramSha256Verifier } from '../../shared/db/scram.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { DB_ROLES, DB_SIDES, ensureServiceLogins } from '../../shared/pipeline/appRole.js';
import { migrateService, type Service } from '../../shared/pipeline/schema.js';
import { localDataApi } from '../helpers/dataApi.js';
import { type PrivatePostgres, startPrivatePostgres } from '../helpers/privatePostgres.js';
import { DATABASE_URL, uniqueName } from '../helpers/services.js';

/**
 * The verifier the migrate function stores is the one PostgreSQL computes, and a login with the
 * password works through SCRAM-SHA-256: on a server of this file's own whose every connection
 * must authenticate that way (the shared local server trusts every connection and must not be
 * reconfigured). The same server shows that both services' databases migrating at once create
 * the cluster-wide group roles of their `_roles` migrations without failing.
 */
describe('SCRAM-SHA-256 passwords', () => {
  it('PostgreSQL computes the same verifier for the same password and salt (a role created and rolled back)', async () => {
    const admin = new PgDatabase({ connectionString: DATABASE_URL, max: 1 });
    const probe = uniqueName('scram_probe');
    try {
      const stored = await admin
        .transaction(async (tx) => {
          await tx.query("SET LOCAL password_encryption = 'scram-sha-256'");
          await tx.query(`CREATE ROLE ${probe} PASSWORD 'pencil-Pa55'`);
          const { rows } = await tx.query<{ p: string }>(
            'SELECT rolpassword AS p FROM pg_authid WHERE rolname = $1',
            [probe],
          );
          throw Object.assign(new Error('roll back'), { stored: rows[0]?.p });
        })
        .catch((err: { stored?: string }) => err.stored);
      const m = /^SCRAM-SHA-256\$(\d+):([^$]+)\$/.exec(stored ?? '');
      expect(m, stored).not.toBeNull();
      expect(
        scramSha256Verifier('pencil-Pa55', {
          salt: Buffer.from(m?.[2] ?? '', 'base64'),
          iterations: Number(m?.[1]),
        }),
      ).toBe(stored);
      const { rows } = await admin.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [probe]);
      expect(rows).toEqual([]);
    } finally {
      await admin.close();
    }
  });

  describe('on a server that requires SCRAM-SHA-256', () => {
    let server: PrivatePostgres | undefined;
    let skip = '';
    const databases = ['rm_scram_a', 'rm_scram_b', 'rm_scram_c', 'rm_scram_d'];

    beforeAll(async () => {
      const started = await startPrivatePostgres();
      if (typeof started === 'string') {
        skip = started;
        console.info(`private PostgreSQL: ${started}: skipped`);
        return;
      }
      server = started;
    }, 120_000);
    afterAll(async () => {
      await server?.stop();
    }, 60_000);

    it("both services' databases migrating at once create the cluster-wide roles once, without failing", async (ctx) => {
      if (!server) return ctx.skip(skip);
      const admin = new PgDatabase({ connectionString: server.url, max: 1 });
      for (const d of databases) await admin.query(`CREATE DATABASE ${d}`);
      await admin.close();
      const dbs = databases.map(
        (d) => new PgDatabase({ connectionString: withDatabase(server?.url ?? '', d), max: 2 }),
      );
      try {
        // the order service's schema in rm_scram_a and _c, inventory's in _b and _d
        const services: Service[] = ['orders', 'inventory', 'orders', 'inventory'];
        const results = await Promise.all(
          dbs.map((db, i) => migrateService(db, services[i] as Service)),
        );
        for (const r of results) expect(r.skipped).toEqual([]);
        const { rows } = await (dbs[0] as PgDatabase).query<{ rolname: string }>(
          `SELECT rolname::text FROM pg_roles WHERE rolname LIKE '%\\_app' ORDER BY 1`,
        );
        expect(rows.map((r) => r.rolname)).toEqual(DB_SIDES.map((s) => DB_ROLES[s].group).sort());
      } finally {
        for (const db of dbs) await db.close();
      }
    }, 120_000);

    it('each side logs in with its password (SCRAM), directly and through the Data API endpoint; a wrong password is refused', async (ctx) => {
      if (!server) return ctx.skip(skip);
      const db = new PgDatabase({
        connectionString: withDatabase(server.url, 'rm_scram_a'),
        max: 1,
      });
      const logins = Object.fromEntries(
        DB_SIDES.map((s) => [s, { username: `scram_${s}`, password: `Pa55-${s}-0123456789` }]),
      ) as Record<(typeof DB_SIDES)[number], { username: string; password: string }>;
      try {
        await ensureServiceLogins(db, logins);
        const { rows: method } = await db.query<{ auth: string }>(
          "SELECT auth_method AS auth FROM pg_hba_file_rules WHERE type = 'host' LIMIT 1",
        );
        expect(method[0]?.auth).toBe('scram-sha-256');
      } finally {
        await db.close();
      }
      const url = (user: string, password: string) => {
        const u = new URL(withDatabase(server?.url ?? '', 'rm_scram_a'));
        u.username = user;
        u.password = password;
        return u.toString();
      };
      for (const side of DB_SIDES) {
        const login = logins[side];
        const as = new PgDatabase({
          connectionString: url(login.username, login.password),
          max: 1,
        });
        try {
          const { rows } = await as.query<{ me: string }>('SELECT current_user::text AS me');
          expect(rows[0]?.me, side).toBe(login.username);
        } finally {
          await as.close();
        }
        const wrong = new PgDatabase({ connectionString: url(login.username, 'not-it'), max: 1 });
        await expect(wrong.query('SELECT 1'), side).rejects.toThrow(
          /password authentication failed/,
        );
        await wrong.close();
      }
      // the Data API endpoint logs in with the secret's username and password, as the service does
      const api = await localDataApi(withDatabase(server.url, 'rm_scram_a'), 'rm_scram_a', {
        loginFor: async () => logins.orders,
      });
      try {
        const placed = await new OrderService({ db: api.db }).place({
          sku: 'SKU-SCRAM',
          quantity: 1,
          correlationId: 'scram',
        });
        expect(placed.created).toBe(true);
      } finally {
        await api.close();
      }
      const refused = await localDataApi(withDatabase(server.url, 'rm_scram_a'), 'rm_scram_a', {
        loginFor: async () => ({ ...logins.orders, password: 'not-it' }),
      });
      try {
        await expect(refused.db.query('SELECT 1')).rejects.toThrow(
          /password authentication failed/,
        );
      } finally {
        await refused.close();
      }
    }, 120_000);
  });
});
