import { natsRig } from './rigs.js';
import { runTransportContract } from './transport.contract.js';

// One durable pull consumer, one worker: JetStream delivers in stream order.
runTransportContract({
  name: 'NATS JetStream, worker mode',
  features: { orderedPerKey: true, delayToleranceMs: 1_500, partialBatchResponse: true },
  create: (label) => natsRig(`contract_${label}`),
});
