import { randomUUID } from 'node:crypto';
import { expect, inject } from 'vitest';
import { JournalRecorder } from '../../devkit/journalRecorder.js';
import type { LocalDeployment } from '../../devkit/lambda/LocalDeployment.js';
import { LocalPipeline, synthesizedAssembly } from '../../devkit/lambda/localPipeline.js';
import type { SynthResult } from '../../devkit/lambda/synth.js';
import { journalEntryOf } from '../../devkit/processes.js';
import { createScratchDatabase, type ScratchDatabase } from '../../devkit/scratch.js';
import { createScratchVhost } from '../../devkit/transports/rabbitmq.js';
import type { ScratchVhost } from '../../devkit/transports/types.js';
import { scheduledEvent } from '../../devkit/triggers/scheduleTrigger.js';
import { waitFor } from '../../devkit/waitFor.js';
import { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { DB_ROLES, DB_SIDES, type DbSide } from '../../shared/pipeline/appRole.js';
import { inventoryDatabaseUrl } from '../../shared/pipeline/schema.js';
import { AMQP_URL, DATABASE_URL, RABBITMQ_MANAGEMENT_URL, uniqueName } from './services.js';

/**
 * The deployed bundles of one transport stood up for one test file: `cdk synth` (cached by
 * source digest, shared by every file of the run), the two services' databases and (RabbitMQ) a
 * virtual host of their own, queues with the file's prefix on the run's fauxqs, secrets in the
 * run's moto (or one of its own when moto is not on PATH), and the journal lines every function
 * logs.
 */
export interface BundleRig {
  pipeline: LocalPipeline;
  deployment: LocalDeployment;
  /** The order service's database (the cluster's default, deployed). */
  db: ScratchDatabase;
  /**
   * The inventory service's database (stock, reservations, `inventory_outbox`): `<db>_inventory`,
   * created by the migrate bundle (`pipeline.deploy()`), dropped at close.
   */
  inventoryDb: PgDatabase;
  vhost: ScratchVhost | undefined;
  journal: JournalRecorder;
  /** Every line each function wrote (its CloudWatch Logs, EMF metrics included). */
  logs: Map<string, string[]>;
  synth: SynthResult;
  name: string;
  close(): Promise<void>;
}

export async function bundleRig(
  transport: 'sqs' | 'rabbitmq',
  label: string,
  options: {
    context?: Record<string, string>;
    /** Variables replacing what the template sets (`LocalDeploymentOptions.environment`). */
    environment?: Record<string, string>;
    /** The cluster's emulated auto-pause (`LocalDeploymentOptions.autoPause`). */
    autoPause?: { timeScale: number; resumeMs?: number };
    /**
     * An SQS server of the file's own, where the deployment's queues keep their pinned names (no
     * prefix): what tools that look the queues up by name, as on AWS, need. Default: the run's
     * fauxqs, with the file's prefix.
     */
    sqs?: { endpoint: string };
  } = {},
): Promise<BundleRig> {
  const { assembly, synth } = await synthesizedAssembly({
    transport,
    ...(options.context ? { context: options.context } : {}),
  });
  const name = uniqueName(label);
  const servers = inject('services').sqs;
  const db = await createScratchDatabase(DATABASE_URL, name, { migrated: false });
  const closers: (() => Promise<unknown>)[] = [() => db.drop()];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
  };
  try {
    const vhost =
      transport === 'rabbitmq'
        ? await createScratchVhost(RABBITMQ_MANAGEMENT_URL, AMQP_URL, name)
        : undefined;
    if (vhost) closers.push(() => vhost.delete());
    const journal = new JournalRecorder();
    const logs = new Map<string, string[]>();
    const inventoryUrl = inventoryDatabaseUrl({ DATABASE_URL: db.url });
    const pipeline = await LocalPipeline.start(assembly, {
      name,
      services: {
        databaseUrl: db.url,
        inventoryDatabaseUrl: inventoryUrl,
        amqpUrl: AMQP_URL,
        managementUrl: RABBITMQ_MANAGEMENT_URL,
        sqsEndpoint: options.sqs?.endpoint ?? servers.find((s) => s.name === 'fauxqs')?.endpoint,
        secretsEndpoint: servers.find((s) => s.name === 'moto')?.endpoint,
      },
      sqsQueuePrefix: options.sqs ? '' : `${name.replace(/_/g, '-')}-`,
      ...(vhost ? { vhost: vhost.vhost } : {}),
      // every AWS request the functions send, by service and operation
      countCalls: true,
      ...(options.environment ? { environment: options.environment } : {}),
      ...(options.autoPause ? { autoPause: options.autoPause } : {}),
      onLog: (fn, line) => {
        logs.set(fn, [...(logs.get(fn) ?? []), line]);
        const entry = journalEntryOf(line);
        if (entry) journal.journal.record(entry);
      },
    });
    // before the database goes: the functions hold connections to it through the Data API
    // (the deployment drops the inventory database its migrate bundle created)
    closers.push(() => pipeline.close());
    // connects on first use, once the migrate bundle created the database
    const inventoryDb = new PgDatabase({ connectionString: inventoryUrl, max: 4 });
    closers.push(() => inventoryDb.close());
    return {
      pipeline,
      deployment: pipeline.deployment,
      db,
      inventoryDb,
      vhost,
      journal,
      logs,
      synth,
      name,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * The database user a deployed function reaches the Data API as: the username of the secret its
 * template's `DATA_API_SECRET_ARN` names (what the service reads), or undefined without one.
 */
export async function dataApiLoginOf(f: BundleRig, fnId: string): Promise<string | undefined> {
  const env = f.deployment.environmentOf(f.deployment.assembly.function(fnId), '/var/task');
  if (!env.DATA_API_SECRET_ARN) return undefined;
  return String((await f.deployment.secretValue(env.DATA_API_SECRET_ARN)).username);
}

/**
 * Each database login of the deployment is a member of its side's group role (the services'
 * `_roles` migrations) and of nothing else.
 */
export async function expectLoginsReady(f: BundleRig): Promise<void> {
  const { rows } = await f.db.db.query<{ user: string; groups: string[]; login: boolean }>(
    `SELECT r.rolname::text AS user, r.rolcanlogin AS login,
            ARRAY(SELECT g.rolname::text FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                   WHERE m.member = r.oid ORDER BY 1) AS groups
       FROM pg_roles r WHERE r.rolname = ANY (ARRAY(SELECT jsonb_array_elements_text($1::jsonb)))`,
    [JSON.stringify(Object.values(f.pipeline.dbUsers))],
  );
  const byUser = (a: { user: string }, b: { user: string }) => (a.user < b.user ? -1 : 1);
  expect(rows.sort(byUser)).toEqual(
    DB_SIDES.map((side) => ({
      user: f.pipeline.dbUsers[side],
      login: true,
      groups: [DB_ROLES[side].group],
    })).sort(byUser),
  );
}

/** The side each deployed function reaches the database as (none: no database at all). */
export const FUNCTION_SIDES: Record<string, DbSide | 'none'> = {
  'place-order': 'orders',
  'order-results-sqs': 'orders',
  'order-results-rabbitmq': 'orders',
  'reserve-inventory-sqs': 'inventory',
  'reserve-inventory-rabbitmq': 'inventory',
  'outbox-relay': 'relay',
  maintenance: 'maintenance',
  'broker-setup': 'none',
};

/**
 * The relay's scheduled tick as deployed, after the kicked runs: with nothing left and the last
 * run just now, a tick publishes the heartbeat and makes no Data API call; with a row no kick
 * announced (written behind the producers' back) and an hour of quiet in the relay's state, the
 * tick sweeps and publishes it.
 */
export async function relayTicks(f: BundleRig): Promise<void> {
  await f.deployment.asyncIdle();
  const relay = f.deployment.fn('outbox-relay');
  const tick = () =>
    relay.invokeOrThrow<Record<string, unknown>>(
      scheduledEvent({ ruleArn: 'arn:aws:events:us-east-1:000000000000:rule/RelaySchedule' }),
    );
  f.deployment.calls.reset();
  const logged = f.logs.get('outbox-relay')?.length ?? 0;
  expect(await tick()).toMatchObject({ mode: 'tick' });
  const counts = f.deployment.calls.counts();
  expect(Object.keys(counts).filter((k) => k.startsWith('rds-data:'))).toEqual([]);
  expect(counts['ssm:GetParameter']).toBe(1);
  const emf = (f.logs.get('outbox-relay') ?? [])
    .slice(logged)
    .filter((l) => l.includes('"_aws"'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(emf.filter((m) => m.RelayHeartbeat === 1).map((m) => m.Outbox)).toEqual([
    'outbox',
    'inventory_outbox',
  ]);

  const lost = await new OrderService({ db: f.db.db }).place({
    sku: 'SKU-LOST-KICK',
    quantity: 1,
    correlationId: 'lost-kick',
  });
  const anHourAgo = Date.now() - 61 * 60_000;
  await f.deployment.setParameter(
    'RelayState',
    JSON.stringify({ lastCheckAt: anHourAgo, lastActivityAt: anHourAgo, pending: false }),
  );
  expect(await tick()).toMatchObject({ mode: 'sweep', outbox: { published: 1 } });
  const { rows } = await f.db.db.query('SELECT published_at FROM outbox WHERE id = $1', [
    lost.eventId,
  ]);
  expect(rows[0]?.published_at).not.toBeNull();
}

/**
 * An order whose `order.created` is poison (written around the outbox: quantity 0 breaks the
 * schema), for the caller to send to the consumer queue: the order row, and the envelope.
 */
export async function poisonOrder(f: BundleRig): Promise<{
  orderId: string;
  eventId: string;
  poison: Record<string, unknown>;
}> {
  const orderId = randomUUID();
  const eventId = randomUUID();
  await f.db.db.query(
    `INSERT INTO orders (id, sku, quantity, created_event_id, correlation_id)
     VALUES ($1, 'SKU-P', 1, $2, 'c-poison')`,
    [orderId, eventId],
  );
  const poison = {
    id: eventId,
    type: 'order.created',
    schema_version: '1.0',
    occurred_at: new Date().toISOString(),
    producer: 'order-service',
    correlation_id: 'c-poison',
    causation_id: null,
    aggregate: { type: 'order', id: orderId, version: 1 },
    data: { orderId, sku: 'SKU-P', quantity: 0 },
  };
  return { orderId, eventId, poison };
}

/** Waits until `GET /orders/{id}` shows the order quarantined, with its reason and park time. */
export async function quarantinedView(apiUrl: string, orderId: string) {
  const view = await waitFor(
    async () => {
      const body = (await (await fetch(`${apiUrl}/orders/${orderId}`)).json()) as {
        reservation: { status: string; reason: string; parkedAt?: string };
      };
      return body.reservation.status === 'quarantined' ? body : undefined;
    },
    { timeoutMs: 30_000, message: 'the order shows quarantined' },
  );
  expect(view.reservation.reason).toMatch(/^permanent \(permanent\): .*data\.quantity/);
  expect(view.reservation.parkedAt).toMatch(/^\d{4}-\d\d-\d\dT/);
  return view;
}
