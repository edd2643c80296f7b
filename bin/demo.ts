import { DeleteQueueCommand, GetQueueUrlCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import amqp from 'amqplib';
import pg from 'pg';
import { createPlaceOrderHandler } from '../functions/place-order/handler.js';
import { createReserveInventorySqsHandler } from '../functions/reserve-inventory-sqs/handler.js';
import { DEFAULT_RETENTION, TEST_RETRY_BUDGET } from '../shared/config/budget.js';
import { RABBITMQ_NAMES } from '../shared/config/constants.js';
import { loadEnv } from '../shared/config/env.js';
import { Journal } from '../shared/consumer/journal.js';
import { migrate } from '../shared/db/migrate.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { setFaults } from '../shared/faults.js';
import { ReserveInventory } from '../shared/inventory/ReserveInventory.js';
import { getStock, setStock } from '../shared/inventory/stock.js';
import { startHttpApi } from '../shared/local/httpServer.js';
import { requireServices } from '../shared/local/preflight.js';
import { ensureLocalSqs } from '../shared/local/sqsServer.js';
import { SqsTrigger } from '../shared/local/sqsTrigger.js';
import { createLogger } from '../shared/logger.js';
import { OrderService } from '../shared/orders/OrderService.js';
import { OutboxStore } from '../shared/outbox/OutboxStore.js';
import { createRabbitRelays } from '../shared/outbox/rabbitRelays.js';
import { createSqsRelays } from '../shared/outbox/sqsRelays.js';
import { listParked } from '../shared/transport/rabbitmq/parking.js';
import { RabbitConnection } from '../shared/transport/rabbitmq/RabbitConnection.js';
import {
  amqpUrlForVhost,
  RabbitManagement,
} from '../shared/transport/rabbitmq/RabbitManagement.js';
import { RabbitSettler } from '../shared/transport/rabbitmq/RabbitSettler.js';
import { RabbitWorker } from '../shared/transport/rabbitmq/RabbitWorker.js';
import { prepareInventoryTopology } from '../shared/transport/rabbitmq/topology.js';
import { createSqsClient } from '../shared/transport/sqs/client.js';
import { sqsParkingLot } from '../shared/transport/sqs/parking.js';
import { SqsSettler } from '../shared/transport/sqs/SqsSettler.js';
import { ensureSqsPipeline } from '../shared/transport/sqs/setup.js';
import { sleep } from '../shared/util/async.js';

/**
 * `npm start` (until the comparison lab lands): a short demo of what exists. It places orders
 * through the HTTP API, relays them to RabbitMQ, crashes the relay between the broker's confirm and
 * the mark (a duplicate with the same id, never a loss), then runs the inventory consumer: the inbox
 * absorbs the duplicates, stock is reserved once per order, an oversized order is rejected as a
 * business result and a poison message is parked with its diagnosis; then it replays the same
 * outbox onto SQS (embedded server, Lambda SQS trigger emulation) with the same result. It works in
 * its own database, virtual host and queues and removes them at the end (`--keep` keeps them).
 */
process.env.POWERTOOLS_LOG_LEVEL ??= 'SILENT';
const env = loadEnv();
const keep = process.argv.includes('--keep');
const started = Date.now();
const say = (line = '') => console.log(line);
const step = (title: string) => say(`\n\x1b[1m▸ ${title}\x1b[0m`);

await requireServices({
  postgres: env.DATABASE_URL,
  rabbitmq: env.AMQP_URL,
  rabbitManagement: env.RABBITMQ_MANAGEMENT_URL,
});

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
  await prepareInventoryTopology({
    channel: (fn) => connection.withChannel(fn),
    management,
    vhost: demoVhost,
    budget: TEST_RETRY_BUDGET,
    retention: DEFAULT_RETENTION,
  });
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
  const big = await post('/orders', { sku: 'SKU-RED', quantity: 9 });
  say(`  POST /orders {sku: SKU-RED, quantity: 9} → ${big.status} (more than will be free)`);
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

  step('The audit queue (every order event, a second consumer)');
  const audit = new Map<string, number>();
  for (;;) {
    const msg = await ch.get(RABBITMQ_NAMES.auditQueue, { noAck: true });
    if (!msg) break;
    const id = msg.properties.messageId as string;
    audit.set(id, (audit.get(id) ?? 0) + 1);
  }
  say(
    `  ${audit.size} distinct message ids, ${[...audit.values()].reduce((a, n) => a + n, 0)} copies (each twice)`,
  );

  step('Inventory consumer (worker mode): inbox claim + stock update + reservation in one COMMIT');
  await ch.publish(RABBITMQ_NAMES.ordersExchange, 'order.created', Buffer.from('{not-json'), {
    messageId: '00000000-0000-4000-8000-00000000dead',
    type: 'order.created',
  });
  say('  (and one poison message: a body that is not JSON)');
  const journal = new Journal();
  const counts = new Map<string, number>();
  journal.addSink((e) => {
    const key = e.step === 'effect-committed' ? `committed (${e.outcome})` : e.step;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  });
  const useCase = new ReserveInventory({ db, journal }, { budget: TEST_RETRY_BUDGET });
  const worker = new RabbitWorker(
    {
      connection,
      settler: new RabbitSettler(
        { connection },
        { budget: TEST_RETRY_BUDGET, consumer: 'inventory@demo' },
      ),
      process: (m) => useCase.process(m),
      journal,
    },
    { queue: RABBITMQ_NAMES.inventoryQueue },
  );
  await worker.start();
  const expected = status.published * 2 + 1;
  const deadline = Date.now() + 15_000;
  while ((counts.get('acked') ?? 0) < expected && Date.now() < deadline) await sleep(50);
  await worker.stop();
  for (const [k, n] of [...counts].sort()) say(`  ${k.padEnd(22)} ${n}`);
  const stock = await getStock(db, 'SKU-RED');
  say(
    `  stock SKU-RED: available ${stock?.available}, reserved ${stock?.reserved} (1+2+3 reserved; 4 reserved then released; 9 rejected)`,
  );
  const { rows: rejected } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM inventory_outbox',
  );
  say(
    `  inventory_outbox: ${rejected[0]?.n} inventory.reservation_rejected event (for the order of 9)`,
  );
  const parked = await listParked(connection);
  for (const p of parked) {
    const d = p.diagnosis;
    say(
      `  parked: ${d.messageId} reason=${d.reason} class=${d.errorClass} attempts=${d.attempts} error="${d.error}"`,
    );
  }
  await check.close();

  step('The same events on SQS (embedded fauxqs, Lambda SQS trigger emulation, visibility mode)');
  const local = await ensureLocalSqs({ endpoint: env.SQS_ENDPOINT, port: env.SQS_LOCAL_PORT });
  const sqs = createSqsClient({
    endpoint: local.endpoint,
    region: env.AWS_REGION,
    requestTimeoutMs: 25_000,
  });
  const prefix = `demo-${process.pid}-`;
  try {
    const queues = await ensureSqsPipeline(sqs, {
      prefix,
      budget: TEST_RETRY_BUDGET,
      retention: DEFAULT_RETENTION,
      visibilityTimeoutSeconds: 30,
    });
    // replay the same outbox onto SQS, against fresh inventory state
    await db.query('UPDATE outbox SET published_at = NULL');
    await db.query('TRUNCATE processed_messages, reservations, inventory_outbox');
    await db.query('UPDATE stock SET reserved = 0');
    const [sqsRelay] = createSqsRelays(
      { db, client: sqs },
      env,
      {
        outbox: { queueUrl: queues.sourceUrl },
        inventory_outbox: { queueUrl: queues.resultsUrl },
      },
      ['outbox'],
    );
    setFaults('relay.after-publish:throw');
    await sqsRelay?.runOnce().catch(() => {});
    setFaults('');
    const again = await sqsRelay?.runOnce();
    say(
      `  relay: crashed once after SendMessageBatch, then sent and marked ${again?.published} (each event twice on the queue)`,
    );
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queues.sourceUrl,
        MessageBody: '{not-json',
        MessageAttributes: {
          event_id: { DataType: 'String', StringValue: '00000000-0000-4000-8000-00000000beef' },
        },
      }),
    );
    const sqsCounts = new Map<string, number>();
    const sqsJournal = new Journal();
    sqsJournal.addSink((e) => {
      const key = e.step === 'effect-committed' ? `committed (${e.outcome})` : e.step;
      sqsCounts.set(key, (sqsCounts.get(key) ?? 0) + 1);
    });
    const sqsUseCase = new ReserveInventory(
      { db, journal: sqsJournal },
      { budget: TEST_RETRY_BUDGET },
    );
    const trigger = new SqsTrigger(
      {
        client: sqs,
        handler: createReserveInventorySqsHandler({
          process: (m) => sqsUseCase.process(m),
          settler: new SqsSettler(
            { client: sqs },
            {
              sourceUrl: queues.sourceUrl,
              parkingUrl: queues.parkingUrl,
              mode: 'visibility',
              budget: TEST_RETRY_BUDGET,
              consumer: 'inventory@demo',
            },
          ),
          logger,
          journal: sqsJournal,
        }),
      },
      { queueUrl: queues.sourceUrl, queueArn: queues.sourceArn, functionTimeoutMs: 5_000 },
    );
    await trigger.start();
    const sqsDeadline = Date.now() + 15_000;
    while ((sqsCounts.get('acked') ?? 0) < expected && Date.now() < sqsDeadline) await sleep(50);
    await trigger.stop();
    for (const [k, n] of [...sqsCounts].sort()) say(`  ${k.padEnd(22)} ${n}`);
    const sqsStock = await getStock(db, 'SKU-RED');
    say(
      `  stock SKU-RED: available ${sqsStock?.available}, reserved ${sqsStock?.reserved} (the same result as on RabbitMQ)`,
    );
    const lot = sqsParkingLot({
      client: sqs,
      sourceUrl: queues.sourceUrl,
      parkingUrl: queues.parkingUrl,
    });
    for (const p of await lot.list(10)) {
      say(
        `  parked: ${p.diagnosis.messageId} reason=${p.diagnosis.reason} error="${p.diagnosis.error}"`,
      );
    }
  } finally {
    for (const name of [
      'inventory-orders',
      'inventory-orders-parking',
      'orders-inventory-results',
    ]) {
      const url = await sqs
        .send(new GetQueueUrlCommand({ QueueName: `${prefix}${name}` }))
        .catch(() => undefined);
      if (url?.QueueUrl)
        await sqs.send(new DeleteQueueCommand({ QueueUrl: url.QueueUrl })).catch(() => {});
    }
    sqs.destroy();
    await local.stop();
  }
  say(
    '\n  On both transports the relay crash produced duplicates with the same id, never a loss; the',
  );
  say('  inbox absorbed every duplicate, so each order reserved stock exactly once.');
  say('  (`npm start` becomes the side-by-side fault lab with issue #6.)');
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
