import { SQS_SERVERS } from '../helpers/sqs.js';
import { sqsRig } from './rigs.js';
import { runTransportContract } from './transport.contract.js';

// FIFO queues: one message group per aggregate, delivered in order.
runTransportContract({
  name: `SQS ${SQS_SERVERS[0]?.name ?? 'fauxqs'} FIFO, visibility mode`,
  features: { orderedPerKey: true, delayToleranceMs: 2_500, partialBatchResponse: true },
  create: (label) =>
    sqsRig(SQS_SERVERS[0] as (typeof SQS_SERVERS)[number], `fifo_${label}`, 'visibility', true),
});
