/**
 * SQS queue names pinned by DESIGN §5. A prefix (`SQS_QUEUE_PREFIX`, empty by default) lets several
 * test files or labs share one server without sharing queues.
 */
export const SQS_NAMES = {
  inventoryQueue: 'inventory-orders',
  parkingQueue: 'inventory-orders-parking',
  inventoryFifoQueue: 'inventory-orders.fifo',
  parkingFifoQueue: 'inventory-orders-parking.fifo',
  /** The order service's queue for inventory results (published from inventory_outbox). */
  inventoryResultsQueue: 'orders-inventory-results',
} as const;

export interface SqsQueueNames {
  source: string;
  parking: string;
  fifo: boolean;
}

export function sqsQueueNames(prefix = '', fifo = false): SqsQueueNames {
  return fifo
    ? {
        source: `${prefix}${SQS_NAMES.inventoryFifoQueue}`,
        parking: `${prefix}${SQS_NAMES.parkingFifoQueue}`,
        fifo,
      }
    : {
        source: `${prefix}${SQS_NAMES.inventoryQueue}`,
        parking: `${prefix}${SQS_NAMES.parkingQueue}`,
        fifo,
      };
}
