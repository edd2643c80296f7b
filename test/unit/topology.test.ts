import { describe, expect, it } from 'vitest';
import { topologySchema } from '../../shared/index.js';
import { RABBITMQ_NAMES, RETRY_NAMES, SQS_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { natsNames } from '../../shared/transport/nats/index.js';
import { rabbitNames } from '../../shared/transport/rabbitmq/topology.js';
import { sqsQueueNames } from '../../shared/transport/sqs/constants.js';

describe('the topology: names are configuration', () => {
  it("derives, from the example's topology, the names its stacks, operators and docs use", () => {
    const rabbit = rabbitNames(PIPELINE_TOPOLOGY);
    expect(rabbit.exchanges).toEqual({
      outbox: RABBITMQ_NAMES.ordersExchange,
      inventory_outbox: RABBITMQ_NAMES.inventoryExchange,
    });
    const [inventory, results] = rabbit.queues;
    expect(inventory).toMatchObject({
      subscription: 'inventory',
      queue: RABBITMQ_NAMES.inventoryQueue,
      ...RETRY_NAMES,
    });
    expect(results).toMatchObject({
      subscription: 'results',
      queue: RABBITMQ_NAMES.inventoryResultsQueue,
      parkingExchange: RABBITMQ_NAMES.resultsParkingExchange,
      parkingQueue: RABBITMQ_NAMES.resultsParkingQueue,
      parkingRoutingKey: RABBITMQ_NAMES.resultsParkingRoutingKey,
    });
    expect(rabbit.taps.map((t) => t.queue)).toEqual([RABBITMQ_NAMES.auditQueue]);

    expect(sqsQueueNames(PIPELINE_TOPOLOGY)).toMatchObject({
      source: SQS_NAMES.inventoryQueue,
      parking: SQS_NAMES.parkingQueue,
      results: SQS_NAMES.inventoryResultsQueue,
    });
    expect(sqsQueueNames(PIPELINE_TOPOLOGY, '', true)).toMatchObject({
      source: SQS_NAMES.inventoryFifoQueue,
      parking: SQS_NAMES.parkingFifoQueue,
    });

    const nats = natsNames('p_', PIPELINE_TOPOLOGY);
    expect(nats.streams).toEqual({
      outbox: { stream: 'p_ORDERS', subjectRoot: 'p_orders' },
      inventory_outbox: { stream: 'p_INVENTORY', subjectRoot: 'p_inventory' },
    });
    expect(nats.consumers.inventory).toMatchObject({ name: 'p_inventory', filter: 'p_orders.>' });
    expect(nats.consumers.results).toMatchObject({ name: 'p_results', stream: 'p_INVENTORY' });
  });

  it("derives another service's names from its own topology, with nothing of the example", () => {
    const shipping = {
      streams: { shipping_outbox: 'shipping' },
      subscriptions: {
        shipping: {
          queue: 'shipping.reservations',
          stream: 'shipping_outbox',
          types: ['parcel.booked'],
          failures: 'retries' as const,
        },
      },
    };
    const rabbit = rabbitNames(shipping);
    expect(rabbit.exchanges).toEqual({ shipping_outbox: 'shipping' });
    expect(rabbit.queues[0]).toMatchObject({
      queue: 'shipping.reservations',
      exchange: 'shipping',
      bindings: ['parcel.booked'],
      retryExchange: 'shipping.reservations.retry',
      parkingQueue: 'shipping.reservations.parking',
    });
    expect(sqsQueueNames(shipping, 'x-')).toMatchObject({
      source: 'x-shipping-reservations',
      parking: 'x-shipping-reservations-parking',
      results: undefined,
    });
    expect(natsNames('', shipping).consumers.shipping).toMatchObject({
      stream: 'SHIPPING',
      filter: 'shipping.>',
    });
    const names = JSON.stringify([rabbit, sqsQueueNames(shipping), natsNames('', shipping)]);
    expect(names).not.toMatch(/inventory|orders/);
  });

  it('refuses a subscription of a stream it does not have, and a stream named like its own exchanges', () => {
    const bad = {
      streams: { outbox: 'orders' },
      subscriptions: {
        inventory: { queue: 'q', stream: 'nope', types: ['#'], failures: 'retries' },
      },
    };
    expect(topologySchema.safeParse(bad).error?.issues[0]?.message).toBe(
      'subscriptions.inventory: no stream "nope"',
    );
    expect(topologySchema.safeParse(PIPELINE_TOPOLOGY).success).toBe(true);
    expect(() =>
      rabbitNames({ ...PIPELINE_TOPOLOGY, streams: { outbox: 'orders.retry' } }),
    ).toThrow(/backend's own/);
  });
});
