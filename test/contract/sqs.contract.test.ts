import { SQS_SERVERS } from '../helpers/sqs.js';
import { sqsRig } from './rigs.js';
import { runTransportContract } from './transport.contract.js';

for (const server of SQS_SERVERS) {
  // Standard queues promise no order; a crash costs a visibility timeout (6 s here).
  runTransportContract({
    name: `SQS ${server.name}, visibility mode`,
    features: { orderedPerKey: false, delayToleranceMs: 2_500, partialBatchResponse: true },
    create: (label) => sqsRig(server, `vis_${label}`, 'visibility'),
  });
  runTransportContract({
    name: `SQS ${server.name}, resend mode`,
    features: { orderedPerKey: false, delayToleranceMs: 2_500, partialBatchResponse: true },
    create: (label) => sqsRig(server, `resend_${label}`, 'resend'),
  });
}
