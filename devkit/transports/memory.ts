import type { LocalTransport } from './types.js';

/** The in-memory backend: nothing to run, nothing to isolate (each backend is its own broker). */
export const memoryLocal: LocalTransport = {
  name: 'memory',
  shared: false,
  required: () => ({}),
  namespace: async () => ({ config: {}, delete: async () => {} }),
};
