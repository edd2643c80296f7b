import {
  type MessageAttributeValue,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { encodeEnvelope } from '../../shared/envelope/envelope.js';
import { SQS_SERVERS } from '../helpers/sqs.js';
import { SqsInventoryBench } from '../helpers/sqsInventory.js';

/**
 * A parked SQS message packs its diagnosis into one attribute now; messages parked before, one
 * attribute per field (`park_reason`, `error_class`, `error`, `consumer`, `retry_attempt`,
 * `first_failure_at`), are still read by `parked list` and redriven as before.
 */
describe.each(SQS_SERVERS)('SQS parking lot: the older diagnosis layout ($name)', (server) => {
  let b: SqsInventoryBench | undefined;
  afterEach(async () => {
    await b?.close();
    b = undefined;
  });

  it('is listed with its diagnosis and redriven; a new park packs it into one attribute', async () => {
    const bench = await SqsInventoryBench.create(server, `old_layout_${server.name}`);
    b = bench;
    await bench.stock('SKU-L', 5);
    const old = bench.orderCreated('SKU-L', 1);
    const str = (v: string): MessageAttributeValue => ({ DataType: 'String', StringValue: v });
    await bench.client.send(
      new SendMessageCommand({
        QueueUrl: bench.queues.parkingUrl,
        MessageBody: encodeEnvelope(old).toString('utf8'),
        MessageAttributes: {
          event_id: str(old.id),
          event_type: str(old.type),
          schema_version: str(old.schema_version),
          correlation_id: str(old.correlation_id),
          retry_attempt: str('3'),
          first_failure_at: str('2026-12-01T10:00:00.000Z'),
          park_reason: str('exhausted'),
          error_class: str('transient'),
          error: str('connect ECONNREFUSED'),
          consumer: str('inventory@old'),
        },
      }),
    );
    const [listed] = await bench.parked();
    expect(listed).toMatchObject({
      via: 'consumer',
      diagnosis: {
        messageId: old.id,
        attempts: 3,
        firstFailureAt: '2026-12-01T10:00:00.000Z',
        reason: 'exhausted',
        errorClass: 'transient',
        error: 'connect ECONNREFUSED',
        consumer: 'inventory@old',
        correlationId: old.correlation_id,
        // not in the old attributes: read from the body
        traceId: old.trace_id,
        producer: 'order-service',
        origin: { queue: `${bench.prefix}inventory-orders` },
      },
    });

    await bench.trigger();
    const result = await bench.backend.parkingLot().redrive({ ids: [old.id] });
    expect(result.moved).toEqual([old.id]);
    await waitFor(async () => (await bench.reservation(old.aggregate.id))?.status === 'reserved', {
      message: 'the redriven message is processed',
    });

    // A new park: the identity it came with and the packed diagnosis, nothing else.
    await bench.sendRaw([{ body: '{not-json', messageId: 'new-layout', type: 'order.created' }]);
    const parked = await waitFor(
      async () => (await bench.parked()).find((p) => p.diagnosis.messageId === 'new-layout'),
      { message: 'parked with the new layout' },
    );
    expect(parked.diagnosis).toMatchObject({ reason: 'permanent', consumer: 'inventory@test' });
    const { Messages = [] } = await bench.client.send(
      new ReceiveMessageCommand({
        QueueUrl: bench.queues.parkingUrl,
        MaxNumberOfMessages: 10,
        VisibilityTimeout: 0,
        MessageAttributeNames: ['All'],
      }),
    );
    const raw = Messages.find((m) => m.MessageAttributes?.event_id?.StringValue === 'new-layout');
    expect(Object.keys(raw?.MessageAttributes ?? {}).sort()).toEqual([
      'diagnosis',
      'event_id',
      'event_type',
    ]);
    expect(JSON.parse(raw?.MessageAttributes?.diagnosis?.StringValue ?? '{}')).toMatchObject({
      v: 1,
      reason: 'permanent',
      errorClass: 'permanent',
      attempts: 0,
      origin: { queue: `${bench.prefix}inventory-orders`, exchange: null, routingKey: null },
    });
  }, 60_000);
});
