import { memoryBackend } from '../../shared/transport/memory/index.js';
import { runTransportContract } from './transport.contract.js';

// The in-memory reference backend: no I/O, runs in the unit project in seconds.
runTransportContract({
  name: 'in-memory',
  features: { orderedPerKey: true, delayToleranceMs: 300, partialBatchResponse: true },
  create: async () => {
    const backend = memoryBackend({ consumer: 'contract' });
    await backend.prepare();
    return {
      backend,
      missingDestination: backend.publisher('no-such-stream'),
      startConsumer: (handler) => backend.consume(handler),
      close: () => backend.close(),
    };
  },
});
