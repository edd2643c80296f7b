import { rabbitRig } from './rigs.js';
import { runTransportContract } from './transport.contract.js';

// One invocation at a time per mapping (as on AWS): batches keep publish order.
runTransportContract({
  name: 'RabbitMQ, Amazon MQ trigger emulation',
  features: { orderedPerKey: true, delayToleranceMs: 1_500, partialBatchResponse: true },
  create: (label) => rabbitRig(`lambda_${label}`, 'lambda'),
});
