import amqp from 'amqplib';
import pg from 'pg';
import { createPlaceOrderHandler } from '../functions/place-order/handler.js';
import { RABBITMQ_NAMES } from '../shared/config/constants.js';
import { loadEnv } from '../shared/config/env.js';
import { migrate } from '../shared/db/migrate.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { setFaults } from '../shared/faults.js';
import { setStock } from '../shared/inventory/stock.js';
import { startHttpApi } from '../shared/local/httpServer.js';
import {
  checkPostgres,
  checkRabbitManagement,
  checkRabbitMq,
  describeProblem,
  type ServiceProblem,
} from '../shared/local/preflight.js';
import { createLogger } from '../shared/logger.js';
import { OrderService } from '../shared/orders/OrderService.js';
import { OutboxStore } from '../shared/outbox/OutboxStore.js';
import { createRabbitRelays } from '../shared/outbox/rabbitRelays.js';
import { RabbitConnection } from '../shared/transport/rabbitmq/RabbitConnection.js';
import {
  amqpUrlForVhost,
  RabbitManagement,
} from '../shared/transport/rabbitmq/RabbitManagement.js';
import { declareTopology } from '../shared/transport/rabbitmq/topology.js';

/**
 * `npm start` (until the comparison lab lands): a short demo of what exists. It places orders
 * through the HTTP API, relays them to RabbitMQ, crashes the relay between the broker's confirm and
 * the mark, and shows that the result is a duplicate with the same id, never a loss. It works in its
 * own database and virtual host and removes them at the end (`--keep` keeps them).
 */
process.env.POWERTOOLS_LOG_LEVEL ??= 'SILENT';
const env = loadEnv();
const keep = process.argv.includes('--keep');
const started = Date.now();
const say = (line = '') => console.log(line);
const step = (title: string) => say(`\n\x1b[1m▸ ${title}\x1b[0m`);

const problems = [
  await checkPostgres(env.DATABASE_URL),
  (await checkRabbitMq(env.AMQP_URL)) ?? (await checkRabbitManagement(env.RABBITMQ_MANAGEMENT_URL)),
].filter(Boolean) as ServiceProblem[];
if (problems.length > 0) {
  for (const p of problems) console.error(describeProblem(p));
  process.exit(2);
}

const demoDb = 'reliable_messaging_demo';
const demoVhost = 'reliable-messaging-demo';
const adminUrl = new URL(env.DATABASE_URL);
adminUrl.pathname = '/postgres';
const admin = new pg.Client({ connectionString: adminUrl.toString() });
await admin.connect();
await admin.query(`DROP DATABASE IF EXISTS ${demoDb} WITH (FORCE)`);
await admin.query(`CREATE DATABASE ${demoDb}`);
const dbUrl = new URL(env.DATABASE_URL);
dbUrl.pathname = `/${demoDb}`;
const management = new RabbitManagement(env.RABBITMQ_MANAGEMENT_URL);
await management.deleteVhost(demoVhost);
await management.createVhost(demoVhost);
const amqpUrl = amqpUrlForVhost(env.AMQP_URL, demoVhost);

const db = new PgDatabase({ connectionString: dbUrl.toString(), max: 4, applicationName: 'demo' });
const connection = new RabbitConnection({ url: amqpUrl, connectionName: 'demo' });
const logger = createLogger('demo');
const outbox = new OutboxStore('outbox');

try {
  step('Setup');
  const { applied } = await migrate(db);
  await connection.withChannel((ch) => declareTopology(ch));
  await setStock(db, 'SKU-RED', 10);
  say(
    `  database ${demoDb}: ${applied.length} migrations applied; RabbitMQ vhost "${demoVhost}": topology declared`,
  );

  const api = await startHttpApi(
    createPlaceOrderHandler({ orders: new OrderService({ db }), logger }),
    { port: 0 },
  );
  const post = async (path: string, body?: unknown) => {
    const res = await fetch(`${api.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  step('Place orders through the HTTP API (order row + outbox row in one transaction)');
  const orderIds: string[] = [];
  for (let i = 1; i <= 4; i++) {
    const r = await post('/orders', { sku: 'SKU-RED', quantity: i });
    orderIds.push(r.body.orderId as string);
    say(`  POST /orders {sku: SKU-RED, quantity: ${i}} → ${r.status} event ${r.body.eventId}`);
  }
  const repeat = await post('/orders', { sku: 'SKU-RED', quantity: 1, orderId: orderIds[0] });
  say(
    `  POST /orders again with orderId ${orderIds[0]?.slice(0, 8)}… → ${repeat.status}, same event ${repeat.body.eventId} (no second event)`,
  );
  const bad = await post('/orders', { sku: 'SKU-RED', quantity: -1 });
  say(`  POST /orders {quantity: -1} → ${bad.status} ${JSON.stringify(bad.body)}`);
  const cancel = await post(`/orders/${orderIds[3]}/cancel`);
  say(
    `  POST /orders/${orderIds[3]?.slice(0, 8)}…/cancel → ${cancel.status}, event ${cancel.body.eventId} (order.cancelled, version 2)`,
  );
  await api.close();
  let status = await outbox.status(db);
  say(`  outbox: ${status.backlog} events waiting to be published`);

  const [relay] = createRabbitRelays({ db, connection }, env, ['outbox']);
  if (!relay) throw new Error('no relay');

  step(
    'Relay round with FAULTS=relay.after-publish:throw (crash after the broker confirmed, before the mark)',
  );
  setFaults('relay.after-publish:throw');
  try {
    await relay.runOnce();
  } catch (err) {
    say(`  relay: ${(err as Error).message} → transaction rolled back`);
  }
  setFaults('');
  status = await outbox.status(db);
  const check = await amqp.connect(amqpUrl);
  const ch = await check.createChannel();
  say(
    `  outbox: still ${status.backlog} unpublished; ${RABBITMQ_NAMES.inventoryQueue} already holds ${(await ch.checkQueue(RABBITMQ_NAMES.inventoryQueue)).messageCount} messages`,
  );

  step('Relay round after the "restart"');
  const round = await relay.runOnce();
  status = await outbox.status(db);
  say(
    `  relay: claimed ${round.claimed}, confirmed and marked ${round.published}, failed ${round.failed}`,
  );
  say(`  outbox: ${status.backlog} unpublished, ${status.published} published`);

  step(`What the consumers' queues hold`);
  for (const queue of [RABBITMQ_NAMES.inventoryQueue, RABBITMQ_NAMES.auditQueue]) {
    const seen = new Map<string, { type: string; version: number; copies: number }>();
    for (;;) {
      const msg = await ch.get(queue, { noAck: true });
      if (!msg) break;
      const body = JSON.parse(msg.content.toString()) as {
        type: string;
        aggregate: { version: number };
      };
      const id = msg.properties.messageId as string;
      const entry = seen.get(id) ?? { type: body.type, version: body.aggregate.version, copies: 0 };
      entry.copies++;
      seen.set(id, entry);
    }
    say(`  ${queue}:`);
    for (const [id, e] of seen)
      say(`    message_id ${id}  ${e.type.padEnd(15)} v${e.version}  × ${e.copies}`);
  }
  await check.close();
  say(
    '\n  Every event arrived; the crash produced duplicates with the same message id, never a loss.',
  );
  say(
    '  The idempotent consumer (inbox keyed by message id) that absorbs them arrives with the next issue.',
  );
  say(
    `\nDone in ${((Date.now() - started) / 1000).toFixed(1)} s.${keep ? ` Kept database ${demoDb} and vhost ${demoVhost}.` : ''}`,
  );
} finally {
  await connection.close();
  await db.close();
  if (!keep) {
    await admin.query(`DROP DATABASE IF EXISTS ${demoDb} WITH (FORCE)`);
    await management.deleteVhost(demoVhost);
  }
  await admin.end();
}
