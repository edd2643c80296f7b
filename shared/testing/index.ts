/**
 * The library's testing entry point (`reliable-messaging-serverless/testing`): the in-memory
 * backend, a fast reference with the port's semantics, for a user's unit tests of their handler
 * and for the contract suite. Integration tests belong on a real broker.
 */
export {
  MemoryBackend,
  type MemoryBackendConfig,
  memoryBackend,
  memoryModule,
} from '../transport/memory/index.js';
