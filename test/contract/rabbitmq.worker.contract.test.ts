import { rabbitRig } from './rigs.js';
import { runTransportContract } from './transport.contract.js';

// One queue, one consumer, no failures in between: RabbitMQ delivers in publish order.
runTransportContract({
  name: 'RabbitMQ, worker mode',
  features: { orderedPerKey: true, delayToleranceMs: 1_500, partialBatchResponse: true },
  create: (label) => rabbitRig(`worker_${label}`, 'worker'),
});
