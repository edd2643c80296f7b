import {
  type MessageAttributeValue,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../devkit/waitFor.js';
import { encodeEnvelope } from '../../shared/index.js';
import { SQS_SERVERS } from '../helpers/sqs.js';
import { SqsInventoryRig } from '../helpers/sqsInventory.js';

/**
 * A parked SQS message packs its diagnosis into one attribute now; messages parked before, one
 * attribute per field (`park_reason`, `error_class`, `error`, `consumer`, `retry_attempt`,
 * `first_failure_at`), are still read by `parked list` and redriven as before.
 */
describe.each(SQS_SERVERS)('SQS parking lot: the older diagnosis layout ($name)', (server) => {
  let b: SqsInventoryRig | undefined;
  afterEach(async () => {
    await b?.close();
    b = undefined;
  });

  it('is listed with its diagnosis and redriven; a new park packs it into one attribute', async () => {
    const rig = await SqsInventoryRig.create(server, `old_layout_${server.name}`);
    b = rig;
    await rig.stock('SKU-L', 5);
    const old = rig.orderCreated('SKU-L', 1);
    const str = (v: string): MessageAttributeValue => ({ DataType: 'String', StringValue: v });
    await rig.client.send(
      new SendMessageCommand({
        QueueUrl: rig.queues.parkingUrl,
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
    const [listed] = await rig.parked();
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
        origin: { queue: `${rig.prefix}inventory-orders` },
      },
    });

    await rig.trigger();
    const result = await rig.backend.parkingLot().redrive({ ids: [old.id] });
    expect(result.moved).toEqual([old.id]);
    await waitFor(async () => (await rig.reservation(old.aggregate.id))?.status === 'reserved', {
      message: 'the redriven message is processed',
    });

    // A new park: the identity it came with and the packed diagnosis, nothing else.
    await rig.sendRaw([{ body: '{not-json', messageId: 'new-layout', type: 'order.created' }]);
    const parked = await waitFor(
      async () => (await rig.parked()).find((p) => p.diagnosis.messageId === 'new-layout'),
      { message: 'parked with the new layout' },
    );
    expect(parked.diagnosis).toMatchObject({ reason: 'permanent', consumer: 'inventory@test' });
    const { Messages = [] } = await rig.client.send(
      new ReceiveMessageCommand({
        QueueUrl: rig.queues.parkingUrl,
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
      origin: { queue: `${rig.prefix}inventory-orders`, exchange: null, routingKey: null },
    });
  }, 60_000);
});
