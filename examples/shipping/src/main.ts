import { fileURLToPath } from 'node:url';
import {
  DEFAULT_RETENTION,
  DEFAULT_RETRY_BUDGET,
  loadBudget,
  migrate,
  OutboxRelay,
} from 'reliable-messaging-serverless';
import { PgDatabase } from 'reliable-messaging-serverless/pg';
import { rabbitmqModule, vhostOf } from 'reliable-messaging-serverless/rabbitmq';
import { migrations, OUTBOX, shippingHandler, TOPOLOGY } from './shipping.js';

/**
 * The shipping service as one process: migrates its database, declares its queue on the broker,
 * consumes `inventory.reserved` and relays its own outbox, until SIGTERM or SIGINT.
 */
const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (!value) throw new Error(`${name} is not set`);
  return value;
};

const db = new PgDatabase({ connectionString: env('DATABASE_URL') });
const amqpUrl = env('AMQP_URL', 'amqp://guest:guest@127.0.0.1:5672');
const budget = loadBudget(process.env, DEFAULT_RETRY_BUDGET);
const backend = rabbitmqModule.create({
  url: amqpUrl,
  managementUrl: env('RABBITMQ_MANAGEMENT_URL', 'http://guest:guest@127.0.0.1:15672'),
  vhost: vhostOf(amqpUrl),
  budget,
  retention: DEFAULT_RETENTION,
  consumer: 'shipping-service',
  topology: TOPOLOGY,
});

await migrate(db, await migrations(fileURLToPath(new URL('../migrations', import.meta.url))));
await backend.prepare('consume');
const consumer = await backend.consume(shippingHandler(db, budget));
const relay = new OutboxRelay(
  { db, publisher: backend.publisher(OUTBOX) },
  { table: OUTBOX, batchSize: 100, maxAttempts: 10 },
);
const stop = new AbortController();
const relaying = relay.drain({
  budgetMs: Number.MAX_SAFE_INTEGER,
  idleWaitMs: 200,
  signal: stop.signal,
});
console.log('shipping: ready');

const shutdown = async () => {
  stop.abort();
  await consumer.stop();
  await relaying;
  await backend.close();
  await db.close();
  console.log('shipping: stopped');
};
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
