import { createHash } from 'node:crypto';
import amqp, { type ChannelModel, type ConfirmChannel, type ConsumeMessage } from 'amqplib';
import pg from 'pg';
import {
  DatabaseSetupExporter,
  executeTransaction,
  getDefaultLogger,
  getDisabledLogger,
  IsolationLevel,
  initializeMessageStorage,
  initializePollingMessageListener,
  type PollingListenerConfig,
  type TransactionalLogger,
  type TransactionalMessage,
  type TransactionalMessageHandler,
} from 'pg-transactional-outbox';
import { decodeEnvelope, type Envelope } from '../shared/envelope/envelope.js';
import { SCHEMA_VERSION_HEADER } from '../shared/transport/rabbitmq/constants.js';
import { eventIdOf } from './effect.js';
import type { PeerConsumer, PeerContext, PeerDelivery } from './types.js';

/**
 * pg-transactional-outbox (README of 0.5.7) doing our consumer's job (its transactional inbox)
 * and our relay's job (its transactional outbox), both with its polling listener: the machine's
 * PostgreSQL has `wal_level=replica`, and the README's "Polling Listener Setup" needs "no special
 * extensions or settings".
 */

const PACKAGES = ['pg-transactional-outbox', 'amqplib', 'pg'];

const logger = (name: string): TransactionalLogger =>
  process.env.PGTO_LOG ? getDefaultLogger(name) : getDisabledLogger();

/** The schema of a namespace's inbox/outbox (the library's tables are `inbox` and `outbox`). */
export function trxSchema(namespace: string): string {
  const slug = `trx_${namespace.toLowerCase().replace(/[^a-z0-9_]+/g, '_')}`.replace(/_+$/, '');
  if (slug.length <= 50) return slug;
  return `${slug.slice(0, 40)}_${createHash('sha1').update(namespace).digest('hex').slice(0, 8)}`;
}

/**
 * The README's "Database setup" in the namespace's schema: the library's own script
 * (`DatabaseSetupExporter`, what its setup CLI writes to `example-trx-polling.sql`): table, grants,
 * the `next_*_messages` polling function, indexes. One role for listener and handler ("you could
 * use a single database role"): the connecting user. Its unqualified `DROP INDEX IF EXISTS` run
 * with the search path on its schema. Then the polling listener's config on that table.
 */
async function setupTable(
  databaseUrl: string,
  outboxOrInbox: 'outbox' | 'inbox',
  namespace: string,
  settings: Partial<PollingListenerConfig['settings']>,
): Promise<{ schema: string; config: PollingListenerConfig }> {
  const schema = trxSchema(namespace);
  const script = DatabaseSetupExporter.createPollingScript(
    {
      outboxOrInbox,
      database: new URL(databaseUrl).pathname.slice(1),
      schema,
      table: outboxOrInbox,
      listenerRole: 'CURRENT_USER',
      nextMessagesName: `next_${outboxOrInbox}_messages`,
    },
    true, // skipRoles: the role part is only comments anyway
  );
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(`SET search_path TO ${schema}; ${script}`);
  } finally {
    await client.end();
  }
  const config: PollingListenerConfig = {
    outboxOrInbox,
    dbListenerConfig: { connectionString: databaseUrl },
    settings: {
      dbSchema: schema,
      dbTable: outboxOrInbox,
      nextMessagesFunctionName: `next_${outboxOrInbox}_messages`,
      // its .d.ts says this defaults to dbSchema; 0.5.7's default is 'public'
      nextMessagesFunctionSchema: schema,
      // the README's examples (both sides): batches of 5, polling every 250 ms
      nextMessagesBatchSize: 5,
      nextMessagesPollingIntervalInMs: 250,
      // inbox: "it is suggested to always enable the maximum attempts protection and the
      // poisonous message protection"; outbox: its example disables both
      enableMaxAttemptsProtection: outboxOrInbox === 'inbox',
      enablePoisonousMessageProtection: outboxOrInbox === 'inbox',
      ...settings,
    },
  };
  return { schema, config };
}

/** The README's "Message format", from our envelope. */
function toMessage(e: Envelope): TransactionalMessage {
  return {
    id: e.id,
    aggregateType: e.aggregate.type,
    aggregateId: e.aggregate.id,
    messageType: e.type,
    // "Way to group messages for parallel message execution": one order's events in order,
    // different orders side by side.
    segment: e.aggregate.id,
    payload: e,
    createdAt: e.occurred_at,
  };
}

export const pgTransactionalOutboxPeer: PeerConsumer = {
  id: 'peer-pg-transactional-outbox',
  transport: 'rabbitmq',
  packages: PACKAGES,
  setup:
    'pg-transactional-outbox 0.5.7 as its README sets it up, polling listener ("Using database polling", ' +
    '"Polling Listener Setup": no logical replication needed). "Database setup": its DatabaseSetupExporter ' +
    'polling script creates the inbox table, grants, the next_inbox_messages function and indexes (in a schema ' +
    'of the run; one role for listener and handler, which "Polling Listener Setup" allows). "Implementing the ' +
    'transactional inbox consumer": an amqplib consumer (prefetch = concurrency) stores each message with ' +
    'initializeMessageStorage in its own READ COMMITTED transaction (executeTransaction) and acks after the ' +
    'commit (nacks to retry when the insert fails; a body that is no envelope is dead-lettered, as its RabbitMQ ' +
    'example declares a dead-letter queue); the polling listener runs a TransactionalMessageHandler for ' +
    "('order', 'order.created') whose handle runs the effect on the client of the library's transaction, the " +
    'one that marks the inbox row processed. "Message format": id, aggregateType/aggregateId from the envelope, ' +
    'messageType = type, segment = the order id ("way to group messages for parallel message execution"), ' +
    'payload = the envelope, createdAt = occurred_at. Settings: nextMessagesBatchSize = concurrency (the ' +
    'messages it keeps in flight; its example has 5), polling every 250 ms as in its example; "Message retry ' +
    'strategy" maxAttempts = maxDeliveries; "Poisonous message retry strategy" on (maxPoisonousAttempts 3); ' +
    'the rest its defaults (row lock 5 s between attempts, handler timeout 15 s).',
  guarantee:
    'Exactly-once processing with at-least-once delivery: "a message is stored exactly once" in the inbox (its ' +
    'id is the primary key, duplicates are dropped) and the handler "marks the message only as done when your ' +
    'code finishes successfully", in the same transaction as the effect. Kept ids deduplicate only until the ' +
    'cleanup deletes them (processed rows after 7 days by default). After maxAttempts failures the row is ' +
    "marked abandoned and stays in the inbox (no dead-letter queue). Measured caveat (0.5.7): the handler's " +
    "NOWAIT row lock can collide with the polling function's row locks; that counts as a failed attempt (retried " +
    'after the 5 s lock), so a valid message can use up its attempts and be abandoned unhandled.',
  async start(ctx: PeerContext) {
    if (!ctx.amqpUrl) throw new Error('pg-transactional-outbox peer: no amqpUrl');
    const log = logger('inbox');
    const { schema, config } = await setupTable(ctx.databaseUrl, 'inbox', ctx.namespace, {
      nextMessagesBatchSize: ctx.concurrency,
      maxAttempts: ctx.maxDeliveries,
    });

    const queue = `${ctx.namespace}orders`;
    const deadLetterQueue = `${ctx.namespace}orders.dead`;
    const conn = await amqp.connect(ctx.amqpUrl);
    const ch = await conn.createChannel();
    await ch.assertQueue(deadLetterQueue, { durable: true });
    await ch.assertQueue(queue, {
      durable: true,
      arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': deadLetterQueue },
    });
    await ch.prefetch(ctx.concurrency);

    // the message receiver: store in the inbox, ack after the commit
    const storeInboxMessage = initializeMessageStorage(config, log);
    const pool = new pg.Pool({ connectionString: ctx.databaseUrl, max: ctx.concurrency });
    pool.on('error', () => {});
    const journal = (step: 'received' | 'acked' | 'abandoned', id: string, redelivered = false) =>
      ctx.journal?.record({
        step,
        messageId: id,
        eventType: 'order.created',
        attempt: 0,
        redelivered,
      });
    const inFlight = new Set<Promise<void>>();
    const receive = async (msg: ConsumeMessage) => {
      // a delivery from the broker, whatever happens to it next
      journal(
        'received',
        eventIdOf(msg.content.toString(), msg.properties.messageId as string | undefined),
        msg.fields.redelivered,
      );
      let message: TransactionalMessage;
      try {
        message = toMessage(decodeEnvelope(msg.content));
      } catch {
        ch.nack(msg, false, false); // not storable: to the dead-letter queue
        return;
      }
      try {
        await executeTransaction(
          await pool.connect(),
          (client) => storeInboxMessage(message, client),
          IsolationLevel.ReadCommitted,
        );
        ch.ack(msg);
        journal('acked', message.id, msg.fields.redelivered);
      } catch {
        ch.nack(msg, false, true); // "It can try it multiple times if needed"
      }
    };
    const { consumerTag } = await ch.consume(queue, (msg) => {
      if (!msg) return;
      const p = receive(msg).finally(() => inFlight.delete(p));
      inFlight.add(p);
    });

    // the inbox listener: the handler runs in the library's transaction
    const handler: TransactionalMessageHandler = {
      aggregateType: 'order',
      messageType: 'order.created',
      async handle(message, client) {
        const body = JSON.stringify(message.payload);
        const delivery: PeerDelivery = {
          messageId: message.id,
          attempt: message.startedAttempts,
        };
        if (ctx.handleIn) await ctx.handleIn(client, body, delivery);
        else await ctx.handle(body, delivery);
      },
      async handleError(_error, message, _client, retry) {
        if (!retry) journal('abandoned', message.id);
      },
    };
    const [shutdown] = initializePollingMessageListener(config, [handler], log);

    return {
      input: { kind: 'amqp', exchange: '', routingKey: queue, queue, deadLetterQueue },
      // where it parks: the inbox rows it abandoned (max attempts or poison protection)
      async parked(db) {
        const { rows } = await db.query<{ id: string; attempts: number }>(
          `SELECT id, finished_attempts AS attempts FROM ${schema}.inbox WHERE abandoned_at IS NOT NULL`,
        );
        return rows.map((r) => ({ messageId: r.id, attempts: r.attempts, reason: 'abandoned' }));
      },
      async stop() {
        await ch.cancel(consumerTag).catch(() => {});
        await Promise.allSettled([...inFlight]);
        await conn.close().catch(() => {});
        await shutdown();
        await pool.end();
      },
    };
  },
};

export interface PgtoRelay {
  /** Writes the envelopes into its outbox in one transaction, as a producer would. */
  enqueue(envelopes: Envelope[]): Promise<void>;
  /** Events confirmed by the broker (distinct). */
  published(): number;
  /** Commit-to-confirm lag per confirmed event (ms). */
  lags(): number[];
  /** Its outbox table (schema-qualified). */
  table: string;
  stop(): Promise<void>;
}

export const pgTransactionalOutboxRelay = {
  packages: PACKAGES,
  setup:
    'pg-transactional-outbox 0.5.7, "Implementing the transactional outbox producer" with the polling listener ' +
    '(initializePollingMessageListener; "Using database polling", "Polling Listener Setup"). "Database setup": ' +
    'its DatabaseSetupExporter polling script (outbox table, grants, next_outbox_messages, indexes) in a schema ' +
    'of the run, one role. Producer: initializeMessageStorage inside the business transaction (executeTransaction), ' +
    'one transaction per enqueue call; "Message format" mapped from the envelope (segment = order id). Listener ' +
    'settings from its example: batch size 5, polling every 250 ms, max attempts and poisonous message ' +
    'protection disabled for the outbox. "Message Publisher": a GeneralMessageHandler publishing the envelope ' +
    "on an amqplib confirm channel and resolving on the broker's confirm, so the row is marked processed only " +
    'after it (reopening the channel after a failure).',
  guarantee:
    '"It ensures that outgoing messages are only sent when your code successfully commits your transaction"; ' +
    'the outbox row "is then marked as processed only if the message was successfully sent", else "the message ' +
    'is sent again": at least once. Caveat: 0.5.7 never reads enableMaxAttemptsProtection, so after maxAttempts ' +
    '(5) failed sends the row is abandoned, not sent.',
  async start(opts: {
    databaseUrl: string;
    amqpUrl: string;
    exchange: string;
    routingKey: string;
    namespace: string;
  }): Promise<PgtoRelay> {
    const log = logger('outbox');
    const { schema, config } = await setupTable(opts.databaseUrl, 'outbox', opts.namespace, {});
    const storeOutboxMessage = initializeMessageStorage(config, log);
    const pool = new pg.Pool({ connectionString: opts.databaseUrl });
    pool.on('error', () => {});
    const committedAt = new Map<string, number>();
    const confirmedAt = new Map<string, number>();

    // one connection and confirm channel, reopened on the next publish after a failure
    let broker: Promise<{ model: ChannelModel; ch: ConfirmChannel }> | undefined;
    const open = async () => {
      const model = await amqp.connect(opts.amqpUrl);
      const ch = await model.createConfirmChannel();
      const reset = () => {
        broker = undefined;
      };
      model.on('error', reset);
      model.on('close', reset);
      ch.on('error', reset);
      ch.on('close', reset);
      if (opts.exchange) await ch.checkExchange(opts.exchange);
      return { model, ch };
    };
    const channel = () => {
      broker ??= open().catch((err) => {
        broker = undefined;
        throw err;
      });
      return broker;
    };
    await channel();

    const publisher = {
      async handle(message: TransactionalMessage): Promise<void> {
        const { ch } = await channel();
        const e = message.payload as Envelope;
        await new Promise<void>((resolve, reject) =>
          ch.publish(
            opts.exchange,
            opts.routingKey,
            Buffer.from(JSON.stringify(e)),
            {
              persistent: true,
              contentType: 'application/json',
              messageId: message.id,
              type: message.messageType,
              headers: { [SCHEMA_VERSION_HEADER]: e.schema_version },
            },
            (err) => (err ? reject(err) : resolve()),
          ),
        );
        if (!confirmedAt.has(message.id)) confirmedAt.set(message.id, Date.now());
      },
    };
    const [shutdown] = initializePollingMessageListener(config, publisher, log);

    return {
      table: `${schema}.outbox`,
      async enqueue(envelopes) {
        await executeTransaction(await pool.connect(), async (client) => {
          for (const e of envelopes) await storeOutboxMessage(toMessage(e), client);
        });
        const at = Date.now();
        for (const e of envelopes) committedAt.set(e.id, at);
      },
      published: () => confirmedAt.size,
      lags: () =>
        [...confirmedAt].flatMap(([id, at]) => {
          const c = committedAt.get(id);
          return c === undefined ? [] : [Math.max(0, at - c)];
        }),
      async stop() {
        await shutdown();
        const b = await broker?.catch(() => undefined);
        await b?.model.close().catch(() => {});
        await pool.end();
      },
    };
  },
};
