import { rabbitHarness } from './harnesses.js';
import { runTransportContract } from './transport.contract.js';

// One invocation at a time per mapping (as on AWS): batches keep publish order.
runTransportContract({
  name: 'RabbitMQ, Amazon MQ trigger emulation',
  features: { orderedPerKey: true, delayToleranceMs: 1_500 },
  create: (label) => rabbitHarness(`lambda_${label}`, 'lambda'),
});
