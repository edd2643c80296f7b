import type { Backend, MessageHandler, RunningConsumer } from '../shared/port/types.js';
import { localTransport } from './transports/index.js';
import type { ConsumerSettings } from './transports/types.js';

export type { ConsumerMode, ConsumerSettings } from './transports/types.js';

/** Starts a consumer of the backend's inventory queue (or results queue) around `handler`. */
export async function startConsumer(
  backend: Backend,
  handler: MessageHandler,
  settings: ConsumerSettings = {},
): Promise<RunningConsumer> {
  const mode = settings.mode ?? backend.capabilities.consumeModes[0] ?? 'worker';
  if (mode === 'worker') {
    return backend.consume(handler, {
      queue: settings.queue,
      journal: settings.journal,
      concurrency: settings.concurrency,
      prefetch: settings.prefetch,
      maxBatch: settings.maxBatch,
      reconnectBaseMs: settings.reconnectBaseMs,
      reconnectMaxMs: settings.reconnectMaxMs,
      notices: settings.notices,
    });
  }
  const deployed = localTransport(backend.transport).deployed;
  if (!deployed) throw new Error(`the ${backend.transport} backend has no Lambda event source`);
  return deployed.emulate(backend, handler, settings);
}
