import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type Envelope,
  inboxHandler,
  libraryMigrations,
  type MessageHandler,
  type Migration,
  newEnvelope,
  OutboxStore,
  type RetryBudget,
  type SqlDatabase,
  type Topology,
} from 'reliable-messaging-serverless';
import { z } from 'zod';

/** The outbox this service publishes from, in its own database. */
export const OUTBOX = 'shipping_outbox';

/**
 * Its streams and subscriptions: it publishes `shipping.*` events from its outbox to `shipping`,
 * and reads `inventory.reserved` from inventory's stream (`inventory`), through a queue of its own.
 */
export const TOPOLOGY: Topology = {
  streams: { [OUTBOX]: 'shipping', inventory_outbox: 'inventory' },
  subscriptions: {
    shipping: {
      queue: 'shipping.reservations',
      stream: 'inventory_outbox',
      types: ['inventory.reserved'],
      failures: 'retries',
    },
  },
};

/** The library's tables (its inbox, its outbox), then its own (`migrations/`). */
export async function migrations(dir: string): Promise<Migration[]> {
  const own = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  return [
    ...libraryMigrations({ outboxes: [OUTBOX] }),
    ...(await Promise.all(
      own.map(async (file) => {
        const sql = await readFile(join(dir, file), 'utf8');
        const checksum = createHash('sha256').update(sql).digest('hex');
        return { name: file.replace(/\.sql$/, ''), sql, checksum };
      }),
    )),
  ];
}

/** The part of `inventory.reserved` (major 1) it reads; more fields are tolerated. */
const reserved = z.looseObject({
  orderId: z.uuid(),
  sku: z.string().min(1),
  quantity: z.number().int().min(1),
});

/**
 * Schedules a shipment for each reserved order, once: the shipment row and its
 * `shipping.scheduled` event commit with the inbox claim, in one transaction.
 */
export function shippingHandler(db: SqlDatabase, budget: RetryBudget): MessageHandler {
  const outbox = new OutboxStore(OUTBOX);
  return inboxHandler({
    db,
    consumer: 'shipping',
    types: ['inventory.reserved'],
    schemaFor: (type, major) =>
      type === 'inventory.reserved' && major === 1 ? reserved : undefined,
    budget,
    async apply(tx, envelope: Envelope) {
      const { orderId, sku, quantity } = envelope.data as z.infer<typeof reserved>;
      await tx.query('INSERT INTO shipments (order_id, sku, quantity) VALUES ($1::uuid, $2, $3)', [
        orderId,
        sku,
        quantity,
      ]);
      await outbox.append(
        tx,
        newEnvelope({
          type: 'shipping.scheduled',
          aggregate: { type: 'shipment', id: orderId, version: 1 },
          data: { orderId, sku, quantity },
          producer: 'shipping-service',
          correlationId: envelope.correlation_id,
          causationId: envelope.id,
        }),
      );
      return 'scheduled';
    },
  });
}
