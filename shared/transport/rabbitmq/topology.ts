import type { Channel } from 'amqplib';
import { EVENT_TYPES, RABBITMQ_NAMES } from '../../config/constants.js';

/**
 * The RabbitMQ topology of DESIGN §4, declared idempotently: declaring it again with the same
 * arguments is a no-op, so every process declares it at start.
 *
 * Only structural arguments (`x-queue-type`) are set here. TTLs, dead lettering and limits belong
 * in policies (applied through the management API, as on Amazon MQ) so they can change without
 * redeclaring queues; queue arguments cannot be changed once a queue exists.
 */
export interface TopologyDeclaration {
  exchanges: { name: string; type: 'topic' | 'direct' }[];
  queues: { name: string; bindings: { exchange: string; pattern: string }[] }[];
}

export const CORE_TOPOLOGY: TopologyDeclaration = {
  exchanges: [
    { name: RABBITMQ_NAMES.ordersExchange, type: 'topic' },
    { name: RABBITMQ_NAMES.inventoryExchange, type: 'topic' },
  ],
  queues: [
    {
      // Inventory consumes exactly the order events it acts on.
      name: RABBITMQ_NAMES.inventoryQueue,
      bindings: [
        { exchange: RABBITMQ_NAMES.ordersExchange, pattern: EVENT_TYPES.orderCreated },
        { exchange: RABBITMQ_NAMES.ordersExchange, pattern: EVENT_TYPES.orderCancelled },
      ],
    },
    {
      // A second consumer of every order event: retries must never copy into it.
      name: RABBITMQ_NAMES.auditQueue,
      bindings: [{ exchange: RABBITMQ_NAMES.ordersExchange, pattern: 'order.#' }],
    },
    {
      // The order service hears inventory results (reservation rejected, …).
      name: RABBITMQ_NAMES.inventoryResultsQueue,
      bindings: [{ exchange: RABBITMQ_NAMES.inventoryExchange, pattern: 'inventory.#' }],
    },
  ],
};

export async function declareTopology(
  ch: Channel,
  topology: TopologyDeclaration = CORE_TOPOLOGY,
): Promise<void> {
  for (const ex of topology.exchanges) {
    await ch.assertExchange(ex.name, ex.type, { durable: true });
  }
  for (const q of topology.queues) {
    // Quorum queues: replicated on Amazon MQ clusters, durable, with poison-message protection.
    await ch.assertQueue(q.name, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    for (const b of q.bindings) {
      await ch.bindQueue(q.name, b.exchange, b.pattern);
    }
  }
}
